//! `sluice top` end to end: `sluice serve` in front of `sluice sim` with a
//! dashboard token from its environment, a few calls through it, then
//! `sluice top --once` draws what the gateway's dashboard says; without
//! the token it says what to give.

mod common;

use std::process::Command;

use common::Stack;

fn config(sim: &str, data: &str) -> String {
    format!(
        r#"data_dir = {data:?}
[trace]
enabled = false
[jobs]
enabled = false
[ui]
token_env = "DASH_TOKEN"

[[providers]]
name = "openai"
base_url = "{sim}/openai/v1"
format = "openai"
"#
    )
}

fn top(url: &str, token: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args([
        "top", "--once", "--width", "150", "--height", "40", "--target", url,
    ])
    .env_remove("SLUICE_UI_TOKEN")
    .env_remove("SLUICE_ADMIN_TOKEN");
    if let Some(t) = token {
        c.env("SLUICE_UI_TOKEN", t);
    }
    c.output().expect("sluice top runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_draws_the_gateways_dashboard() {
    let Stack {
        gateway,
        sim: _sim,
        dir: _dir,
    } = Stack::start("cli-top", &[("DASH_TOKEN", "look-only")], |sim, data| {
        config(sim, &data.display().to_string())
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    for _ in 0..5 {
        let res = http
            .post(format!("{}/v1/chat/completions", gateway.url))
            .header("x-sluice-workspace", "acme")
            .json(&serde_json::json!({
                "model": "openai/gpt-4o-mini",
                "messages": [{"role": "user", "content": "hi"}],
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    // The snapshot taken after the calls (one a second) lists the model.
    let mut text = String::new();
    for _ in 0..50 {
        let out = top(&gateway.url, Some("look-only"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text = String::from_utf8(out.stdout).unwrap();
        if text.contains("openai/gpt-4o-mini") && text.contains("acme") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for want in [
        "sluice top",
        "openai/gpt-4o-mini",
        "acme",
        "models and APIs",
        "not configured",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }

    // The same as JSON: the snapshot and its history.
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(["top", "--once", "--json", "--target", &gateway.url])
        .env_remove("SLUICE_UI_TOKEN")
        .env("SLUICE_ADMIN_TOKEN", "")
        .arg("--token")
        .arg("look-only");
    let out = c.output().expect("sluice top runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(v["snapshot"].is_object(), "{v}");
    assert!(v["history"].is_array(), "{v}");
    assert!(
        v["snapshot"].to_string().contains("openai/gpt-4o-mini"),
        "{v}"
    );

    let out = top(&gateway.url, None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401") && err.contains("--token"), "{err}");
    let out = top(&gateway.url, Some("wrong"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("403"));
}
