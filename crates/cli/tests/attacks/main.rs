//! The attack suite (issue 33): each reproduction of the issue run
//! against a real `sluice serve` (in front of `sluice sim`), as a hostile
//! tenant or an anonymous caller would, asserting that it is refused or
//! bounded. One file per topic; they share only [`Target`] and the few
//! helpers below (`spend` and `slow_readers` run the simulator in the test
//! process, through `gateway`, to read its counters). Figures (memory
//! before and after a flood of names, money spent against a budget, a
//! victim's latency under slow readers) are printed: `cargo test -p
//! sluice --test attacks -- --nocapture`.

#[path = "../common/mod.rs"]
mod common;

mod gateway;
mod lows;
mod names;
mod open_mode;
mod reach;
mod slow_readers;
mod spend;

use common::{Serve, Stack, TempDir};
use serde_json::Value;

pub use common::client;

/// acme's key.
pub const ACME: &str = "key-acme";
/// globex's key.
pub const GLOBEX: &str = "key-globex";
/// The operator's token.
pub const ADMIN: &str = "the-operator-token";
/// A model the simulator serves.
pub const MODEL: &str = "openai/gpt-4o-mini";

/// A `sluice serve` with two tenants (acme, globex) and an admin token in
/// front of a `sluice sim`: OpenAI, Anthropic and Gemini (native) models,
/// and Slack. `extra` (TOML) goes before the tables.
#[derive(Debug)]
pub struct Target {
    pub gateway: Serve,
    pub sim: Serve,
    pub http: reqwest::Client,
    pub dir: TempDir,
}

impl Target {
    pub fn start(what: &str, extra: &str) -> Target {
        Target::start_with(what, extra, true)
    }

    /// As [`Target::start`]; `tenants: false` leaves them out (an open
    /// gateway).
    pub fn start_with(what: &str, extra: &str, tenants: bool) -> Target {
        let Stack { gateway, sim, dir } =
            Stack::start(what, ENV, |sim, data| config(sim, data, extra, tenants));
        Target {
            gateway,
            sim,
            http: client(),
            dir,
        }
    }

    /// `{gateway}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.gateway.url)
    }

    /// POSTs `body` to `path` as `key` (`None`: anonymous).
    pub async fn post(&self, path: &str, key: Option<&str>, body: &Value) -> reqwest::Response {
        let mut req = self.http.post(self.url(path)).json(body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send().await.expect("the gateway answers")
    }
}

const ENV: &[(&str, &str)] = &[
    ("ACME_KEY", ACME),
    ("GLOBEX_KEY", GLOBEX),
    ("GEMINI_KEY", "sim-gemini-key"),
];

/// The gateway's configuration.
pub fn config(sim: &str, data: &std::path::Path, extra: &str, tenants: bool) -> String {
    let tenants = if tenants {
        r#"
[[tenants]]
name = "acme"
api_key_env = "ACME_KEY"
[[tenants]]
name = "globex"
api_key_env = "GLOBEX_KEY"
"#
    } else {
        ""
    };
    format!(
        r#"data_dir = {data:?}
admin_token = "{ADMIN}"
{extra}
[trace]
enabled = false
[adaptive]
policy = "seed"
max_pause_seconds = 60
{providers}api_key_env = "GEMINI_KEY"
[[models]]
prefix = "openai/gpt-4o-mini"
requests_per_second = 50.0
burst = 50
[[apis]]
name = "slack"
base_url = "{sim}/slack"
requests_per_second = 1000.0
burst = 1000
{tenants}"#,
        data = data.display().to_string(),
        providers = common::sim_providers(sim, &["openai", "anthropic", "google"]),
    )
}

/// A chat request body.
pub fn chat(model: &str) -> Value {
    serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "hello there"}],
    })
}

/// The status and the error object of an answer that should be refused.
pub async fn refusal(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, body["error"].clone())
}
