//! What the spend and slow-reader attacks share: the simulator in this
//! process, a `sluice serve` in front of it (started with the suites'
//! harness, `common/`), and calls as a tenant.

use std::time::Duration;

use serde_json::Value;
use sluice_sim::SimHandle;

pub use crate::common::{PATIENCE, Proc, TempDir, chat, free_port, procs, sim};

/// The operator's token in these tests.
pub const ADMIN: &str = "attacks-admin-token";

/// A gateway in front of `sim`: `listen`, `data_dir`, the admin token,
/// the sim as OpenAI and as Google's native Gemini API, limits wide
/// enough that only what is under test bounds the calls, then `rest`
/// (TOML, top-level keys first) as it is.
pub struct Gateway {
    pub url: String,
    /// Killed on drop.
    _proc: Proc,
    _dir: TempDir,
}

impl Gateway {
    pub fn start(name: &str, sim: &SimHandle, rest: &str) -> Gateway {
        let dir = TempDir::new(name);
        let port = free_port();
        let sim = sim.url();
        let config = dir.join("sluice.toml");
        let text = format!(
            r#"listen = "127.0.0.1:{port}"
data_dir = {data:?}
admin_token = "{ADMIN}"
{rest}
[queue]
max_depth_per_tenant = 500
max_depth_total = 1000
concurrency = 64

{providers}
[[models]]
prefix = "openai/"
requests_per_second = 100000.0
burst = 100000

[[models]]
prefix = "google/"
requests_per_second = 100000.0
burst = 100000
"#,
            data = dir.join("data").display().to_string(),
            providers = crate::common::sim_providers(&sim, &["openai", "google"]),
        );
        std::fs::write(&config, text).expect("config written");
        let proc = procs::serve(&config);
        Gateway {
            url: format!("http://127.0.0.1:{port}"),
            _proc: proc,
            _dir: dir,
        }
    }

    /// `method path` with `body` as the operator: the JSON of a 2xx.
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let res = client()
            .request(method.clone(), format!("{}{path}", self.url))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        body
    }

    /// A tenant of the key store with `budgets`, and a key of it.
    pub async fn tenant_key(&self, name: &str, budgets: Value) -> String {
        let post = reqwest::Method::POST;
        self.admin(
            post.clone(),
            "/v1/tenants",
            serde_json::json!({"name": name, "budgets": budgets}),
        )
        .await;
        let key = self
            .admin(post, "/v1/keys", serde_json::json!({"tenant": name}))
            .await;
        key["key"].as_str().expect("a key").to_owned()
    }

    /// A gauge of `/metrics` (scraped with the admin token), by its
    /// whole series name, e.g. `sluice_bulkhead_in_use{pool="model"}`.
    pub async fn gauge(&self, series: &str) -> Option<f64> {
        let text = client()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(ADMIN)
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }
}

/// A client with a generous timeout (a bound against hangs, never a
/// figure that is asserted).
pub fn client() -> reqwest::Client {
    crate::common::client_with(Duration::from_secs(120))
}

/// Polls `check` every 100 ms until it holds, failing after
/// [`PATIENCE`].
pub async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let end = std::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(std::time::Instant::now() < end, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
