//! Tenants' own upstream credentials end to end: `sluice serve` reads them
//! from its environment, sends each tenant's own to `sluice sim` (whose
//! APIs echo the `Authorization` they got), refuses a tenant that has none
//! where the API's token is not shared, and `sluice check-config` prints
//! the variables' names, never their values.

mod common;

use std::process::Command;

use common::{Stack, TempDir};
use serde_json::Value;

/// Slack with a shared token that serves no tenant without its own;
/// acme and globex each with their own, initech with none.
fn config(sim: &str, data: &str) -> String {
    format!(
        r#"data_dir = {data:?}
[trace]
enabled = false
[jobs]
enabled = false

[[apis]]
name = "slack"
base_url = "{sim}/slack"
requests_per_second = 100.0
burst = 100
auth_env = "SLACK_TOKEN"
shared_auth = false

[[tenants]]
name = "acme"
api_key_env = "ACME_KEY"
[tenants.apis.slack]
auth_env = "ACME_SLACK_TOKEN"

[[tenants]]
name = "globex"
api_key_env = "GLOBEX_KEY"
[tenants.apis.slack]
auth_env = "GLOBEX_SLACK_TOKEN"

[[tenants]]
name = "initech"
api_key_env = "INITECH_KEY"
"#
    )
}

const ENV: &[(&str, &str)] = &[
    ("ACME_KEY", "key-acme"),
    ("GLOBEX_KEY", "key-globex"),
    ("INITECH_KEY", "key-initech"),
    ("SLACK_TOKEN", "xoxb-shared-value"),
    ("ACME_SLACK_TOKEN", "xoxb-acme-value"),
    ("GLOBEX_SLACK_TOKEN", "xoxb-globex-value"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sends_each_tenant_its_own_token_from_the_environment() {
    let Stack {
        gateway,
        sim: _sim,
        dir: _dir,
    } = Stack::start("cli-credentials", ENV, |sim, data| {
        config(sim, &data.display().to_string())
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let call = |key: &'static str| {
        http.post(format!("{}/proxy/slack/chat.postMessage", gateway.url))
            .bearer_auth(key)
            .body("{}")
            .send()
    };
    for (key, token) in [
        ("key-acme", "Bearer xoxb-acme-value"),
        ("key-globex", "Bearer xoxb-globex-value"),
    ] {
        let res = call(key).await.unwrap();
        assert_eq!(res.status().as_u16(), 200);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["authorization"], token);
    }
    let res = call("key-initech").await.unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_credential", "{body}");
}

/// `sluice check-config PATH` with `env` (and none of [`ENV`] otherwise).
fn check_config(path: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .arg("check-config")
        .arg(path)
        .env_remove("SLUICE_CONFIG");
    for (var, _) in ENV {
        command.env_remove(var);
    }
    command
        .envs(env.iter().copied())
        .output()
        .expect("sluice check-config runs")
}

#[test]
fn check_config_names_the_variables_and_never_shows_a_value() {
    let dir = TempDir::new("cli-credentials-check");
    let path = dir.join("sluice.toml");
    std::fs::write(&path, config("http://127.0.0.1:9", "data")).unwrap();
    let out = check_config(&path, ENV);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (var, value) in ENV {
        assert!(shown.contains(var), "{var} missing from\n{shown}");
        assert!(!shown.contains(value), "{value} shown in\n{shown}");
    }
    // A tenant's own token must be set when the configuration is loaded.
    let without: Vec<_> = ENV
        .iter()
        .copied()
        .filter(|(k, _)| *k != "GLOBEX_SLACK_TOKEN")
        .collect();
    let out = check_config(&path, &without);
    assert_eq!(out.status.code(), Some(2));
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        error.contains("tenants[1].apis.slack.auth_env")
            && error.contains("GLOBEX_SLACK_TOKEN is not set"),
        "{error}"
    );
}

/// The sim as `openai` and `anthropic`, with no tenants.
fn providers_config(sim: &str, data: &std::path::Path) -> String {
    format!(
        "data_dir = {:?}\n[trace]\nenabled = false\n[jobs]\nenabled = false\n{}",
        data.display().to_string(),
        common::sim_providers(sim, &["openai", "anthropic"])
    )
}

/// A provider whose key variable is unset is named at start-up with its
/// variable, listed as not configured by `/readyz`, and a call to it is
/// answered 503 `provider_not_configured` naming the variable, without
/// reaching the provider (which would answer the caller a 401 as if its
/// own key were wrong); the others still serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_its_key_is_named_and_never_called_without_it() {
    let stack = Stack::start(
        "cli-credentials-missing",
        &[("OPENAI_API_KEY", "")],
        providers_config,
    );
    let warned = stack.gateway.log().join("\n");
    assert!(
        warned.contains("providers without an API key") && warned.contains("OPENAI_API_KEY"),
        "{warned}"
    );
    assert!(!warned.contains("ANTHROPIC_API_KEY is not set"), "{warned}");
    let http = common::client();
    let ready = common::readyz(&http, &stack.gateway.url).await;
    assert_eq!(ready["providers"]["openai"], "not_configured", "{ready}");
    assert_eq!(ready["providers"]["anthropic"], "ready", "{ready}");
    assert_eq!(
        ready["ready"], true,
        "a missing key is not a reason to be pulled"
    );

    let chat = format!("{}/v1/chat/completions", stack.gateway.url);
    let res = http
        .post(&chat)
        .json(&common::chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "provider_not_configured", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    let stats = common::sim_stats(&http, &stack.sim.url).await;
    assert!(
        stats["models"].get("gpt-4o-mini").is_none(),
        "the call reached the provider: {stats}"
    );

    let mut claude = common::chat("anthropic/claude-3-5-haiku", false);
    claude["max_tokens"] = serde_json::json!(16);
    let res = http.post(&chat).json(&claude).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200, "{}", res.text().await.unwrap());
}
