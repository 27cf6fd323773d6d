//! The fault suite (issue 17): real processes (`sluice serve`,
//! `redis-server`, a PostgreSQL cluster of its own; the simulated provider
//! runs in the test process so that its log and counters can be read), a
//! bounded swarm on loopback, a fault injected while it runs, and an
//! assertion on what was lost and what was sent upstream. Counts are
//! asserted, never timings; the figures each test measures are printed
//! (`cargo test -p sluice --test faults -- --nocapture`) and collected in
//! `docs/reliability.md`.
//!
//! Redis and PostgreSQL tests need `scripts/test` (it sets
//! `SLUICE_TEST_REDIS_SERVER` and `SLUICE_TEST_POSTGRES_URL` and installs
//! the servers); without it they print a note and pass.
//!
//! `SLUICE_TEST_FAULTS_LONG=1` runs the long variants: each swarm runs ten
//! times as long and outages last ten times as long.

#[path = "../common/mod.rs"]
mod common;

mod diskfull;
mod ledger;
mod partition;
mod postgres;
mod redis;
mod sigterm;
mod stores;
mod upstream;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sluice_sim::SimHandle;

pub use common::{chat, client, get_json, procs, sim, until};

/// How many times longer swarms and outages run: 1, or 10 with
/// `SLUICE_TEST_FAULTS_LONG=1`.
pub fn scale() -> u32 {
    match std::env::var("SLUICE_TEST_FAULTS_LONG").as_deref() {
        Ok("1") | Ok("true") | Ok("yes") => 10,
        _ => 1,
    }
}

/// `base` times [`scale`].
pub fn span(base: Duration) -> Duration {
    base * scale()
}

/// Writes a gateway config `name` into `dir`: `listen` on a free
/// loopback port, `data_dir` and the sim as OpenAI, Anthropic and Slack,
/// then `rest` (TOML) as it is. Returns the file and the gateway's URL.
pub fn write_config(dir: &Path, name: &str, sim: &str, rest: &str) -> (PathBuf, String) {
    let port = procs::free_port();
    let path = dir.join(name);
    let text = format!(
        r#"listen = "127.0.0.1:{port}"
data_dir = {data:?}
{rest}
{providers}[[apis]]
name = "slack"
base_url = "{sim}/slack"
requests_per_second = 100000.0
burst = 100000
"#,
        data = dir.join("data").display().to_string(),
        providers = common::sim_providers(sim, &["openai", "anthropic"]),
    );
    std::fs::write(&path, text).expect("config written");
    (path, format!("http://127.0.0.1:{port}"))
}

/// A gateway of the suite, started in front of a sim: its process, URL,
/// config file (`sluice.toml`, see [`write_config`]) and directory. Bind
/// every field that is kept: the process is killed, the directory removed,
/// when theirs is dropped.
#[derive(Debug)]
pub struct Gateway {
    pub serve: procs::Proc,
    pub url: String,
    pub cfg: PathBuf,
    pub dir: procs::TempDir,
}

impl Gateway {
    /// A new directory named after `what`, the config with `rest` in it,
    /// and `sluice serve` on that config; returns once it listens.
    pub fn start(what: &str, sim: &SimHandle, rest: &str) -> Gateway {
        let dir = procs::TempDir::new(what);
        let (cfg, url) = write_config(&dir.0, "sluice.toml", &sim.url(), rest);
        Gateway {
            serve: procs::serve(&cfg),
            url,
            cfg,
            dir,
        }
    }
}

/// Reads a whole body; `Err` when the connection broke before its end.
pub async fn body_of(res: reqwest::Response) -> Result<String, String> {
    res.text().await.map_err(|e| format!("{e:?}"))
}

/// Polls the gateway at `url` until every job of `ids` is completed, all
/// within [`procs::PATIENCE`]; the completed jobs, in order.
pub async fn until_completed(
    http: &reqwest::Client,
    url: &str,
    ids: impl IntoIterator<Item = i64>,
) -> Vec<Value> {
    let end = std::time::Instant::now() + procs::PATIENCE;
    let mut done = Vec::new();
    for id in ids {
        loop {
            let job = get_json(http, &format!("{url}/v1/jobs/{id}")).await;
            if job["state"] == "completed" {
                done.push(job);
                break;
            }
            assert!(
                std::time::Instant::now() < end,
                "job {id} never completed: {job}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    done
}
