//! What the black-box suites of the `sluice` binary share: its processes
//! (`sluice serve`, `sluice sim`, `redis-server`, PostgreSQL) started,
//! waited for and killed ([`procs`], [`serve`]), a temporary directory,
//! the simulator in the test's own process, an HTTP client, and the
//! binary's JSON output. A suite at the top of `tests/` declares
//! `mod common;`, one in a folder of its own
//! `#[path = "../common/mod.rs"] mod common;`.
#![allow(dead_code, unused_imports)] // each suite uses a part

pub mod procs;
pub mod serve;

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use sluice_sim::{Sim, SimConfig, SimHandle};

pub use procs::{PATIENCE, Proc, TempDir, free_port, wait_port};
pub use serve::{Serve, Stack};

/// Runs `sluice ARGS`, expects success, parses stdout as JSON.
pub fn run_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("the sluice binary runs");
    let stdout = succeeded(&format!("sluice {args:?}"), out);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
}

/// The stdout of `run` (what ran, for the message), which must have
/// succeeded; its stderr is the message when it did not.
pub fn succeeded(run: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{run} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// A client without connection reuse across tests whose calls give up
/// after `timeout`: a bound against hangs, never a figure that is
/// asserted.
pub fn client_with(timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a client")
}

/// [`client_with`] a generous 60 s.
pub fn client() -> reqwest::Client {
    client_with(Duration::from_secs(60))
}

/// The simulator, in this process (so that its log and counters can be
/// read), on a loopback port.
pub async fn sim(config: SimConfig) -> SimHandle {
    Sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("the sim starts")
}

/// A chat request body without an output limit.
pub fn chat(model: &str, stream: bool) -> Value {
    serde_json::json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "hello there"}],
    })
}

/// The JSON answer to `request` (`what` names it in the message); the
/// call and the JSON must both succeed (the status is the caller's to
/// check in the body).
pub async fn read_json(what: &str, request: reqwest::RequestBuilder) -> Value {
    request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{what}: not JSON: {e}"))
}

/// `GET url` as JSON (see [`read_json`]).
pub async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    read_json(&format!("GET {url}"), http.get(url)).await
}

/// `POST url` with the JSON `body`, its answer as JSON (see [`read_json`]).
pub async fn post_json(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    read_json(&format!("POST {url}"), http.post(url).json(body)).await
}

/// What the simulator at `sim` (its URL) has answered and refused, per
/// model and API: its `/_sim/stats`.
pub async fn sim_stats(http: &reqwest::Client, sim: &str) -> Value {
    get_json(http, &format!("{sim}/_sim/stats")).await
}

/// A gateway's `/readyz`, or `null` when it does not answer with JSON.
pub async fn readyz(http: &reqwest::Client, url: &str) -> Value {
    match http.get(format!("{url}/readyz")).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Waits until `ready` holds for the `/readyz` of every gateway of `urls`,
/// failing after [`PATIENCE`] with `what`.
pub async fn all_ready(
    http: &reqwest::Client,
    urls: &[String],
    what: &str,
    ready: impl Fn(&Value) -> bool,
) {
    let end = std::time::Instant::now() + PATIENCE;
    loop {
        let mut all = true;
        for u in urls {
            all &= ready(&readyz(http, u).await);
        }
        if all {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `done` holds, looking every 20 ms; fails with `what` after
/// [`PATIENCE`].
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(std::time::Instant::now() < end, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `sluice requests ARGS --target URL --json`, its JSON.
pub fn requests_cli(url: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("requests")
        .args(args)
        .args(["--target", url, "--json"])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env_remove("SLUICE_API_KEY")
        .output()
        .expect("sluice requests runs");
    let stdout = succeeded("sluice requests", out);
    serde_json::from_str(&stdout).expect("JSON")
}

/// `GET url` as `token` until `done` holds for its JSON (the ledger
/// writes in the background), or the last answer after 10 s.
pub async fn read_until(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut body = Value::Null;
    for _ in 0..200 {
        body = read_json(&format!("GET {url}"), http.get(url).bearer_auth(token)).await;
        if done(&body) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    body
}

/// The `[[providers]]` tables of the simulator at `sim` (its URL) as the
/// providers `names`: `openai` (OpenAI's format), `anthropic`
/// (Anthropic's), `google` (Gemini's native API), in that order of
/// `names`; TOML for a gateway's config.
pub fn sim_providers(sim: &str, names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            let (format, path) = match *name {
                "openai" => ("", "openai/v1"),
                "anthropic" => ("format = \"anthropic\"\n", "anthropic/v1"),
                "google" => ("format = \"gemini\"\n", "google/v1beta"),
                other => panic!("the sim serves no provider {other:?}"),
            };
            format!("[[providers]]\nname = \"{name}\"\n{format}base_url = \"{sim}/{path}\"\n")
        })
        .collect()
}
