//! The harness every integration test uses: a `sluice sim` and a gateway
//! in front of it, both on `127.0.0.1:0`, the gateway's config edited by
//! the test, traces in a temporary directory of their own, a reqwest
//! client, and helpers for the checks that recur (error bodies, polling
//! `GET /v1/limits` and `/readyz`, holding an in-flight slot).
//!
//! Each `tests/*.rs` file is its own crate and uses a part of this one.
#![allow(dead_code)]

pub mod keys;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::Gateway;
pub use sluice_gateway::config::ModelLimits;
use sluice_gateway::config::{Config, ProviderConfig, WireFormat};
use sluice_sim::{Latency, ModelConfig, Sim, SimConfig, SimHandle};
use tokio::sync::oneshot;

/// How often a bounded wait looks again, and how many times at most:
/// 10 ms × 500 = 5 s, far beyond what any condition here needs.
const POLL: Duration = Duration::from_millis(10);
const POLL_TRIES: u32 = 500;

/// A sim and a gateway in front of it.
#[derive(Debug)]
pub struct Harness {
    /// The simulated upstreams.
    pub sim: SimHandle,
    /// Where the gateway listens.
    pub addr: SocketAddr,
    /// A client for the gateway.
    pub http: reqwest::Client,
    /// Where the gateway writes traces.
    pub trace_dir: PathBuf,
    /// The gateway's data directory (`jobs.db` lives there).
    pub data_dir: PathBuf,
    server: Server,
    _dir: TempDir,
}

/// The gateway, serving on threads and runtimes of its own, as `sluice
/// serve` runs it (`Gateway::spawn`), apart from the test's tasks.
#[derive(Debug)]
struct Server {
    stop: Option<oneshot::Sender<()>>,
    serving: Option<sluice_gateway::Serving>,
}

impl Server {
    async fn start(config: Config, addr: SocketAddr) -> (Server, SocketAddr) {
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = Gateway::spawn(config, Some(addr), async move {
            let _ = stopped.await;
        })
        .await
        .unwrap_or_else(|e| panic!("the gateway starts: {e}"));
        let addr = serving.local_addr();
        let server = Server {
            stop: Some(stop),
            serving: Some(serving),
        };
        (server, addr)
    }

    /// Stops it and waits (draining, flushing the trace writer).
    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(serving) = self.serving.take() {
            let served = tokio::time::timeout(Duration::from_secs(10), serving.stopped())
                .await
                .expect("the gateway stops within its drain timeout");
            served.expect("serve ends cleanly");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failed test still stops its gateway (the sim stops on drop).
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The sim's configuration the tests start from: the seed's providers and
/// APIs with no limits, no latency, no faults and a fixed seed, so that
/// every limit a test meets is one it set.
pub fn sim_config() -> SimConfig {
    SimConfig {
        seed: Some(7),
        ..SimConfig::unlimited()
    }
}

/// A sim model with this latency (and, if given, completion length).
pub fn sim_model(latency: Latency, output_tokens: Option<u32>) -> ModelConfig {
    ModelConfig {
        latency: Some(latency),
        output_tokens,
        ..ModelConfig::default()
    }
}

/// Limits for models under `prefix`: generous unless the test tightens them.
pub fn model_limits(prefix: &str) -> ModelLimits {
    ModelLimits {
        prefix: prefix.to_owned(),
        requests_per_second: 1_000.0,
        burst: 1_000,
        tokens_per_minute: None,
        max_in_flight: None,
        guess: false,
    }
}

/// The gateway's configuration the tests start from: the embedded
/// defaults pointed at the sim, with limits that never bind unless a test
/// sets its own, and retries that back off in milliseconds.
pub fn base_config(sim: &str, dir: &Path) -> Config {
    let mut c = Config {
        data_dir: dir.join("data"),
        ..Config::default()
    };
    c.trace.dir = Some(dir.join("traces"));
    // These tests count grants and cuts exactly: the seed's policy (a 429
    // cuts at once) and no jitter margin. The evidence policy and the
    // margin are tested in sluice-limit (tests/evidence.rs) and measured
    // by `sluice bench adaptive`.
    c.adaptive.policy = sluice_gateway::config::AdaptivePolicy::Seed;
    c.adaptive.jitter_margin_ms = 0;
    c.providers = vec![
        provider("openai", &format!("{sim}/openai/v1"), WireFormat::Openai),
        provider(
            "anthropic",
            &format!("{sim}/anthropic/v1"),
            WireFormat::Anthropic,
        ),
    ];
    // The sim wants a key, the providers' way, as they do.
    c.secrets.insert(SIM_KEY_ENV, "sk-sim-test");
    c.models = vec![model_limits("")];
    for api in &mut c.apis {
        api.base_url = format!("{sim}/{}", api.name);
        api.requests_per_second = 1_000.0;
        api.burst = 1_000;
    }
    c.sessions.requests = 10_000;
    c.default_timeout_ms = 15_000;
    c.retry.initial_backoff_ms = 5;
    c.retry.max_backoff_ms = 20;
    c.retry.max_retry_after_ms = 5_000;
    c.retry.attempt_timeout_ms = 10_000;
    c.shutdown.drain_timeout_ms = 2_000;
    c
}

/// The variable whose value (set in [`base_config`]'s secrets) is the
/// key the test providers send the sim.
pub const SIM_KEY_ENV: &str = "SLUICE_TEST_SIM_KEY";

/// A provider at `base_url` that sends the sim its key.
pub fn provider(name: &str, base_url: &str, format: WireFormat) -> ProviderConfig {
    ProviderConfig {
        name: name.to_owned(),
        base_url: base_url.to_owned(),
        api_key_env: Some(SIM_KEY_ENV.to_owned()),
        shared_auth: true,
        format,
        strip_prefix: true,
        prefixes: Vec::new(),
        auth: sluice_gateway::config::ProviderAuth::Key,
    }
}

impl Harness {
    /// A sim with the default test config and a gateway with the base
    /// config.
    pub async fn start() -> Harness {
        Harness::with(sim_config(), |_| {}).await
    }

    /// A sim with `sim` and a gateway whose base config `edit` changes
    /// (providers and APIs already point at the sim).
    pub async fn with(sim: SimConfig, edit: impl FnOnce(&mut Config)) -> Harness {
        let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let sim = Sim::start(sim, local).await.expect("the sim starts");
        let dir = TempDir::new();
        let mut config = base_config(&sim.url(), dir.path());
        edit(&mut config);
        let trace_dir = config.trace_dir();
        let data_dir = config.data_dir.clone();
        let (server, addr) = Server::start(config, local).await;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("a client");
        Harness {
            sim,
            addr,
            http,
            trace_dir,
            data_dir,
            server,
            _dir: dir,
        }
    }

    /// `http://{gateway}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A POST of `body` as JSON to `path`.
    pub fn post(&self, path: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http.post(self.url(path)).json(body)
    }

    /// A GET of `path`.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path))
    }

    /// `GET path` with `token` as bearer: the answer's JSON, which must
    /// come with a 200.
    pub async fn get_json(&self, path: &str, token: &str) -> Value {
        let res = self
            .get(path)
            .bearer_auth(token)
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(res.status(), StatusCode::OK, "GET {path}");
        res.json().await.expect("a JSON answer")
    }

    /// The text of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let res = self.get("/metrics").send().await.expect("metrics");
        assert_eq!(res.status(), StatusCode::OK);
        res.text().await.expect("metrics text")
    }

    /// POST `body` to `path` and wait for the answer.
    pub async fn send(&self, path: &str, body: &Value) -> reqwest::Response {
        self.post(path, body)
            .send()
            .await
            .expect("the gateway answers")
    }

    /// Every resource `GET /v1/limits` lists.
    pub async fn limits(&self) -> Vec<Value> {
        let res = self.get("/v1/limits").send().await.expect("limits");
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.expect("limits JSON");
        body["resources"]
            .as_array()
            .expect("a `resources` array")
            .clone()
    }

    /// One resource of `GET /v1/limits`, if the limiter has it (idle,
    /// full resources are dropped, so absent means untouched).
    pub async fn resource(&self, name: &str) -> Option<Value> {
        self.limits()
            .await
            .into_iter()
            .find(|r| r["resource"] == name)
    }

    /// Entries waiting in the admission queue, from `/readyz`.
    pub async fn queued(&self) -> u64 {
        let res = self.get("/readyz").send().await.expect("readyz");
        let body: Value = res.json().await.expect("readyz JSON");
        body["queued"].as_u64().expect("`queued` in /readyz")
    }

    /// Takes `resource`'s only in-flight slot through the limiter API, so
    /// that requests needing it wait in the limiter until
    /// [`Harness::release`].
    pub async fn hold(&self, resource: &str) -> String {
        let res = self
            .send("/v1/limits/acquire", &json!({"resource": resource}))
            .await;
        assert_eq!(res.status(), StatusCode::OK, "acquire {resource}");
        let body: Value = res.json().await.expect("grant JSON");
        body["grant_id"].as_str().expect("a grant id").to_owned()
    }

    /// Gives back a grant taken with [`Harness::hold`].
    pub async fn release(&self, grant: &str) {
        let res = self
            .send("/v1/limits/release", &json!({"grant_id": grant}))
            .await;
        assert_eq!(res.status(), StatusCode::OK, "release {grant}");
    }

    /// Stops the gateway (draining and flushing its trace writer), then the
    /// sim. The temporary directory stays until the harness is dropped.
    pub async fn shutdown(&mut self) {
        self.server.shutdown().await;
    }

    /// Stops the gateway gracefully (its ledger written out) and starts
    /// another on the same data directory and sim, with the base config
    /// edited by `edit`.
    pub async fn restart(&mut self, edit: impl FnOnce(&mut Config)) {
        self.server.shutdown().await;
        let mut config = base_config(&self.sim.url(), self._dir.path());
        edit(&mut config);
        let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let (server, addr) = Server::start(config, local).await;
        self.server = server;
        self.addr = addr;
    }

    /// Shuts both down.
    pub async fn stop(mut self) {
        self.shutdown().await;
        self.sim.shutdown().await;
    }
}

/// Another gateway in front of the same sim, with its own config edited
/// by `edit` (distributed tests: replicas sharing limits through Redis).
#[derive(Debug)]
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    server: Server,
    _dir: TempDir,
}

impl Replica {
    /// `http://{replica}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Harness {
    /// Starts another gateway on the harness's sim.
    pub async fn replica(&self, edit: impl FnOnce(&mut Config)) -> Replica {
        let dir = TempDir::new();
        let mut config = base_config(&self.sim.url(), dir.path());
        edit(&mut config);
        let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let (server, addr) = Server::start(config, local).await;
        Replica {
            addr,
            server,
            _dir: dir,
        }
    }
}

/// The keys of the two tenants [`two_tenants`] configures.
pub const ACME: &str = "key-acme";
/// See [`ACME`].
pub const GLOBEX: &str = "key-globex";

/// Two tenants, `acme` and `globex`, with the keys [`ACME`] and [`GLOBEX`].
pub fn two_tenants(c: &mut Config) {
    for (name, key) in [("acme", ACME), ("globex", GLOBEX)] {
        c.tenants
            .push(sluice_gateway::config::TenantConfig::new(name, key));
    }
}

/// A path to call for a route's pattern (`routes::owners()` paths).
pub fn concrete(pattern: &str) -> String {
    pattern
        .replace("{api}", "slack")
        .replace("{*path}", "chat.postMessage")
        .replace("{*rest}", "google/gemini-2.5-flash:generateContent")
        .replace("{resource}", "openai%2Fgpt-4o")
        .replace("{id}", "1")
        .replace("{queue}", "default")
        .replace("{name}", "acme")
        .replace("{file}", "app.js")
}

/// A chat completions body for `model`.
pub fn chat(model: &str) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "hello there"}],
    })
}

/// An `http` job on the `default` queue posting `text` to the sim's Slack.
pub fn slack_job(text: &str) -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
                    "body": {"channel": "C1", "text": text}}
    })
}

/// The value of header `name`, which must be there.
pub fn header(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get(name)
        .unwrap_or_else(|| panic!("header {name} missing: {:?}", res.headers()))
        .to_str()
        .expect("a visible header")
        .to_owned()
}

/// Checks an error answer: the status, and a body
/// `{"error":{"type","message","code"}}` with this code. Returns the
/// `error` object.
pub async fn expect_error(res: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(res.status().as_u16(), status, "status of {:?}", res.url());
    let ctype = header(&res, "content-type");
    assert!(
        ctype.starts_with("application/json"),
        "content type {ctype}"
    );
    let body: Value = res.json().await.expect("an error body in JSON");
    let e = &body["error"];
    assert!(e["type"].is_string(), "error.type in {body}");
    assert!(e["message"].is_string(), "error.message in {body}");
    assert_eq!(e["code"], code, "error.code in {body}");
    e.clone()
}

/// Polls `check` until it holds, at most [`POLL_TRIES`] times; panics
/// with `what` if it never does. A bounded wait, not a timing assertion.
pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_for(what, || {
        let fut = check();
        async move { fut.await.then_some(()) }
    })
    .await;
}

/// Polls `probe` until it finds something, as [`wait_until`] does, and
/// returns what it found.
pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..POLL_TRIES {
        if let Some(found) = probe().await {
            return found;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("gave up waiting until {what}");
}

/// Sends `method target` as written (an HTTP client would resolve dots
/// and encodings first) with extra header lines, on a connection of its
/// own; the status code and the body as text.
pub async fn raw(addr: SocketAddr, method: &str, target: &str, headers: &[&str]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// The `data:` payloads of a server-sent-event stream, in order.
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.trim().to_owned())
        .collect()
}

/// A directory of its own under the system's temporary directory,
/// removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory, removed on drop.
    pub fn new() -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "sluice-gateway-test-{}-{n}-{:x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The PostgreSQL server of `SLUICE_TEST_POSTGRES_URL`, or `None` with a
/// note that `what` is skipped (`scripts/test` starts one and sets it).
pub fn postgres_server(what: &str) -> Option<String> {
    let url = std::env::var("SLUICE_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        eprintln!(
            "note: SLUICE_TEST_POSTGRES_URL is not set; skipping {what} \
             (scripts/test starts a server and sets it)"
        );
    }
    url
}

/// A new, empty database named after `prefix` on `server`, dropped (its
/// connections closed) when the guard is, even by a failing test.
pub async fn fresh_database(server: &str, prefix: &str) -> OnServer {
    use sqlx::{AssertSqlSafe, Connection, PgConnection};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut conn = PgConnection::connect(server)
        .await
        .expect("connect to SLUICE_TEST_POSTGRES_URL");
    // A leftover of the same name (a run killed before its guards
    // dropped) is replaced.
    for ddl in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        sqlx::raw_sql(AssertSqlSafe(ddl))
            .execute(&mut conn)
            .await
            .expect("create a database");
    }
    conn.close().await.expect("close");
    let mut url = url::Url::parse(server).expect("a postgres:// URL");
    url.set_path(&name);
    OnServer {
        url: url.to_string(),
        server: server.to_owned(),
        drop: format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    }
}

/// A database of a test's own (see [`fresh_database`]).
pub type Database = OnServer;

/// Something of a test's own on the test PostgreSQL server (a database, a
/// schema), dropped when the guard is, even by a failing test, so that
/// tests leave none behind.
#[derive(Debug)]
pub struct OnServer {
    /// The URL whose connections use it.
    pub url: String,
    server: String,
    /// The statement that drops it, tolerant of its being gone already (a
    /// test may drop it itself).
    drop: String,
}

impl OnServer {
    /// Guards what `drop` (a statement) drops on `server`, reached at `url`.
    pub fn new(server: &str, url: String, drop: String) -> OnServer {
        OnServer {
            url,
            server: server.to_owned(),
            drop,
        }
    }
}

impl Drop for OnServer {
    fn drop(&mut self) {
        use sqlx::{AssertSqlSafe, Connection, PgConnection};
        let (server, ddl) = (self.server.clone(), self.drop.clone());
        // The test's runtime cannot wait here: a runtime of its own, on a
        // thread of its own. One that cannot be dropped is left with a note.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let mut conn = PgConnection::connect(&server)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::raw_sql(AssertSqlSafe(ddl))
                    .execute(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                conn.close().await.map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("note: left on the test server ({}): {e}", self.drop);
        }
    }
}
