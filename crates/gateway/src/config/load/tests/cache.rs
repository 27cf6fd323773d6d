//! `[cache]`: its defaults, what a file and the environment set, the
//! rules per model and API, and errors that name the key.

use std::time::Duration;

use sluice_usage::cache::{Policy, Scope};

use super::{error, file, with_env};
use crate::config::{CacheSettings, Config};

#[test]
fn the_defaults_match_the_cache_core() {
    let c = Config::default().cache;
    assert!(c.enabled);
    assert!(!c.redis);
    assert_eq!(
        c.store_config(),
        sluice_usage::cache::CacheConfig::default()
    );
    let rule = c.for_model("openai/gpt-4o");
    assert_eq!(rule.policy, Policy::Deterministic);
    assert_eq!(rule.ttl, Duration::from_secs(600));
    assert_eq!(c.for_api("github"), None, "GETs are opt-in");
    assert_eq!(c.scope("acme"), Scope::Tenant("acme".into()));
}

#[test]
fn a_file_sets_every_key_and_the_longest_model_prefix_wins() {
    let c = file(
        r#"
[redis]
url = "redis://127.0.0.1:6379"

[cache]
policy = "off"
max_bytes = 1000000
max_entry_bytes = 1000
ttl_seconds = 60
max_ttl_seconds = 3600
idle_seconds = 30
session_entries = 3
max_session_bytes = 50000
redis = true

[cache.models."openai/"]
policy = "deterministic"

[cache.models."openai/gpt-4o"]
policy = "always"
ttl_seconds = 120

[cache.apis.github]
ttl_seconds = 5

[cache.apis.slack]

[cache.namespaces]
docs = ["acme", "globex"]
"#,
    )
    .cache;
    let store = c.store_config();
    assert_eq!(store.max_bytes, 1_000_000);
    assert_eq!(store.max_entry_bytes, 1_000);
    assert_eq!(store.ttl, Duration::from_secs(60));
    assert_eq!(store.max_ttl, Duration::from_secs(3_600));
    assert_eq!(store.time_to_idle, Some(Duration::from_secs(30)));
    assert_eq!(store.session_entries, 3);
    assert_eq!(store.max_session_bytes, 50_000);
    assert!(c.redis);

    let gpt4o = c.for_model("openai/gpt-4o-2024-08-06");
    assert_eq!(
        (gpt4o.policy, gpt4o.ttl),
        (Policy::Always, Duration::from_secs(120))
    );
    let mini = c.for_model("openai/o3-mini");
    assert_eq!(
        (mini.policy, mini.ttl),
        (Policy::Deterministic, Duration::from_secs(60))
    );
    assert_eq!(c.for_model("anthropic/claude").policy, Policy::Off);

    assert_eq!(c.for_api("github"), Some(Duration::from_secs(5)));
    assert_eq!(c.for_api("slack"), Some(Duration::from_secs(60)));
    assert_eq!(c.for_api("gmail"), None);

    assert_eq!(c.scope("globex"), Scope::Shared("docs".into()));
    assert_eq!(c.scope("initech"), Scope::Tenant("initech".into()));
}

#[test]
fn disabled_means_off_for_every_model_and_api() {
    let c = file("[cache]\nenabled = false\n[cache.models.\"x/\"]\npolicy = \"always\"\n[cache.apis.github]\n").cache;
    assert_eq!(c.for_model("x/y").policy, Policy::Off);
    assert_eq!(c.for_api("github"), None);
}

#[test]
fn the_environment_overrides_cache_keys() {
    let c = with_env(
        "",
        &[
            ("SLUICE_CACHE__ENABLED", "false"),
            ("SLUICE_CACHE__TTL_SECONDS", "30"),
            ("SLUICE_CACHE__IDLE_SECONDS", "10"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .cache;
    assert_eq!(
        c,
        CacheSettings {
            enabled: false,
            ttl_seconds: 30,
            idle_seconds: Some(10),
            ..CacheSettings::default()
        }
    );
}

#[test]
fn cache_errors_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[cache]\nmax_bytes = 0", "cache.max_bytes", "at least 1"),
        (
            "[cache]\nmax_entry_bytes = 0",
            "cache.max_entry_bytes",
            "at least 1",
        ),
        (
            "[cache]\nmax_bytes = 1000",
            "cache.max_bytes",
            "max_entry_bytes (4194304) must not exceed max_bytes (1000)",
        ),
        (
            "[cache]\nmax_bytes = 10000000000\nmax_entry_bytes = 5000000000",
            "cache.max_entry_bytes",
            "at most 4294967295",
        ),
        (
            "[cache]\nttl_seconds = 0",
            "cache.ttl_seconds",
            "at least 1",
        ),
        (
            "[cache]\nttl_seconds = 100000",
            "cache.ttl_seconds",
            "at most max_ttl_seconds (86400), not 100000",
        ),
        (
            "[cache]\nmax_ttl_seconds = 99999999",
            "cache.max_ttl_seconds",
            "30 days",
        ),
        (
            "[cache]\nidle_seconds = 0",
            "cache.idle_seconds",
            "at least 1",
        ),
        (
            "[cache]\nsession_entries = 5000",
            "cache.session_entries",
            "at most 1000",
        ),
        (
            "[cache]\nmax_session_bytes = 0",
            "cache.max_session_bytes",
            "at least 1",
        ),
        (
            "[cache]\nredis = true",
            "cache.redis",
            "needs a [redis] section",
        ),
        (
            "[cache]\npolicy = \"sometimes\"",
            "cache.policy",
            "unknown variant `sometimes`",
        ),
        ("[cache]\nenable = true", "cache.enable", "unknown"),
        (
            "[cache.models.\"openai/\"]\npolicy = \"never\"",
            "cache.models.\"openai/\".policy",
            "unknown variant `never`",
        ),
        (
            "[cache.models.\"openai/\"]\nttl_seconds = 0",
            "cache.models.\"openai/\".ttl_seconds",
            "at least 1",
        ),
        (
            "[cache.models.\"openai/\"]\nttl = 5",
            "cache.models.\"openai/\".ttl",
            "unknown",
        ),
        (
            "[cache.models.\"\"]\npolicy = \"off\"",
            "cache.models.\"\"",
            "must not be empty",
        ),
        (
            "[cache.apis.nowhere]",
            "cache.apis.nowhere",
            "`nowhere` is not in [[apis]]",
        ),
        (
            "[cache.apis.github]\nttl_seconds = 999999",
            "cache.apis.github.ttl_seconds",
            "at most max_ttl_seconds",
        ),
        (
            "[cache.namespaces]\ndocs = []",
            "cache.namespaces.docs",
            "at least one tenant",
        ),
        (
            "[cache.namespaces]\na = [\"acme\"]\nb = [\"acme\"]",
            "cache.namespaces.b",
            "tenant `acme` is also in namespace `a`",
        ),
    ];
    for (toml, key, message) in cases {
        let e = error(toml, &[]);
        assert_eq!(e.key(), Some(*key), "{toml}\n{e}");
        let shown = e.to_string();
        assert!(shown.contains(message), "{toml}\n{shown}");
        assert!(shown.contains("in sluice.toml"), "{toml}\n{shown}");
    }
    let e = error("", &[("SLUICE_CACHE__TTL_SECONDS", "soon")]);
    assert!(e.to_string().contains("SLUICE_CACHE__TTL_SECONDS"), "{e}");
}
