//! Tenants' own upstream credentials: their shape, their checks at load,
//! and that their values are read once and never shown.

use super::{error, vars, with_env};
use crate::config::load::ConfigError;

const TWO_TENANTS: &str = r#"
[[apis]]
name = "slack"
base_url = "https://slack.com/api"
requests_per_second = 3.0
burst = 10
auth_env = "SLACK_TOKEN"
shared_auth = false

[[tenants]]
name = "acme"
api_key_env = "ACME_KEY"
[tenants.apis.slack]
auth_env = "ACME_SLACK_TOKEN"
[tenants.providers.openai]
api_key_env = "ACME_OPENAI_KEY"

[[tenants]]
name = "globex"
api_key_env = "GLOBEX_KEY"
"#;

const ENV: &[(&str, &str)] = &[
    ("SLACK_TOKEN", "xoxb-shared-secret"),
    ("ACME_SLACK_TOKEN", "xoxb-acme-secret"),
    ("ACME_OPENAI_KEY", "sk-acme-secret"),
    ("ACME_KEY", "k-acme-secret"),
    ("GLOBEX_KEY", "k-globex-secret"),
    ("UNRELATED", "not-a-credential"),
];

#[test]
fn tenants_carry_their_own_credentials_read_once_at_load() {
    let c = with_env(TWO_TENANTS, ENV).unwrap_or_else(|e| panic!("{e}"));
    let slack = c.api("slack").unwrap();
    assert!(!slack.shared_auth);
    assert_eq!(c.tenants[0].apis["slack"].auth_env, "ACME_SLACK_TOKEN");
    assert!(c.tenants[1].apis.is_empty());
    assert_eq!(
        c.secrets.get("ACME_SLACK_TOKEN").map(|v| &**v),
        Some("xoxb-acme-secret")
    );
    assert_eq!(
        c.secrets.get("ACME_OPENAI_KEY").map(|v| &**v),
        Some("sk-acme-secret")
    );
    assert_eq!(
        c.secrets.get("SLACK_TOKEN").map(|v| &**v),
        Some("xoxb-shared-secret")
    );
    // Only the variables the configuration names are kept.
    assert!(c.secrets.get("UNRELATED").is_none());
    // Sharing is the default: existing configurations keep working.
    let d = with_env("", &[]).unwrap();
    assert!(d.apis.iter().all(|a| a.shared_auth));
    assert!(d.providers.iter().all(|p| p.shared_auth));
}

#[test]
fn check_config_and_debug_show_variable_names_never_values() {
    let c = with_env(TWO_TENANTS, ENV).unwrap();
    for shown in [c.to_toml(), format!("{c:?}")] {
        for (var, value) in ENV {
            assert!(!shown.contains(value), "{value} in\n{shown}");
            if *var != "UNRELATED" {
                assert!(shown.contains(var), "{var} missing from\n{shown}");
            }
        }
    }
    // What is printed loads back (given the same environment).
    let back = with_env(&c.to_toml(), ENV).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, c);
}

/// A file, its environment, the key the error names, and what it says.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);

#[test]
fn bad_tenant_credentials_are_named() {
    let cases: &[Case<'_>] = &[
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.apis.slakc]\nauth_env = \"T_SLACK\"",
            &[("T_SLACK", "x")],
            "tenants[0].apis.slakc",
            "unknown API \"slakc\": one of",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.apis.slack]\nauth_env = \"T_SLACK\"",
            &[],
            "tenants[0].apis.slack.auth_env",
            "environment variable T_SLACK is not set",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.apis.slack]\nauth_env = \"\"",
            &[],
            "tenants[0].apis.slack.auth_env",
            "must not be empty",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.providers.opneai]\napi_key_env = \"T_OAI\"",
            &[("T_OAI", "x")],
            "tenants[0].providers.opneai",
            "unknown provider \"opneai\": one of openai, anthropic",
        ),
        (
            "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.providers.openai]\napi_key_env = \"T_OAI\"",
            &[],
            "tenants[0].providers.openai.api_key_env",
            "environment variable T_OAI is not set",
        ),
    ];
    for (toml, env, key, message) in cases {
        let e = error(toml, env);
        assert_eq!(e.key(), Some(*key), "{e}");
        assert!(e.to_string().contains(message), "{e}");
    }
    // A token written in the file is not a setting: only a variable is.
    let e = error(
        "[[tenants]]\nname = \"t\"\napi_key = \"k\"\n[tenants.apis.slack]\ntoken = \"xoxb-inline\"",
        &[],
    );
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, .. } if key == "tenants[0].apis.slack.token"),
        "{e}"
    );
    assert!(!e.to_string().contains("xoxb-inline"), "{e}");
}

#[test]
fn a_credential_variable_named_like_a_setting_is_not_one() {
    // `SLUICE_KEY_ACME` would otherwise be read as the setting `key_acme`.
    let toml = "[[tenants]]\nname = \"acme\"\napi_key_env = \"SLUICE_KEY_ACME\"\n\
                [tenants.apis.slack]\nauth_env = \"SLUICE_ACME_SLACK\"";
    let env = [("SLUICE_KEY_ACME", "k"), ("SLUICE_ACME_SLACK", "xoxb")];
    let c = with_env(toml, &env).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.secrets.get("SLUICE_KEY_ACME").map(|v| &**v), Some("k"));
    assert_eq!(
        c.secrets.get("SLUICE_ACME_SLACK").map(|v| &**v),
        Some("xoxb")
    );
    // A variable an override names is read too.
    let c = super::load_str(
        "",
        "sluice.toml",
        vars(&[
            ("SLUICE_APIS__SLACK__AUTH_ENV", "MY_SLACK"),
            ("MY_SLACK", "xoxb-mine"),
        ]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.api("slack").unwrap().auth_env.as_deref(),
        Some("MY_SLACK")
    );
    assert_eq!(c.secrets.get("MY_SLACK").map(|v| &**v), Some("xoxb-mine"));
}
