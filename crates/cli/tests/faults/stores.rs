//! Stores that refuse to start wrong, and a damaged job store (issue 34).
//!
//! - A `keys.db` deleted after keys were issued: before, the gateway
//!   started with no key store (issued keys refused 401) and, with no
//!   `[[tenants]]`, no authentication at all; now start-up is refused,
//!   naming the file and how to restore it.
//! - A `ledger.db` or `jobs.db` truncated to 0 bytes: before, taken for a
//!   new, empty store; now refused the same way. `sluice check-config
//!   --stores` says the same without starting.
//! - A damaged page in `jobs.db` (the root of the index only finished
//!   jobs have entries in, so that enqueues and claims work and no
//!   outcome can be recorded): before, `/readyz` said ready and each job
//!   ran again every time its lease expired; now the workers stop
//!   claiming and `/readyz` answers 503 naming the damage.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_sim::SimConfig;

use crate::procs::{self, TempDir};

#[path = "../../../store/tests/shared/damage.rs"]
mod damage;
use crate::{Gateway, chat, client, sim, write_config};
use damage::damage_index;

const ADMIN: &str = "s3cret";

/// `sluice check-config --stores CONFIG`: success, and what it printed.
fn check_stores(config: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check-config", "--stores"])
        .arg(config)
        .env_remove("SLUICE_CONFIG")
        .output()
        .expect("sluice runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Removes a SQLite file and what WAL mode keeps beside it.
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_keys_db_refuses_start_up_naming_the_file() {
    let sim = sim(SimConfig::unlimited()).await;
    let dir = TempDir::new("stores-keys");
    let rest = format!("admin_token = {ADMIN:?}\n[trace]\nenabled = false\n");
    let (cfg, url) = write_config(&dir.0, "sluice.toml", &sim.url(), &rest);
    let http = client();

    // A fresh data directory: the first start needs no step of its own.
    let (ok, text) = check_stores(&cfg);
    assert!(ok, "{text}");
    assert!(
        text.contains("keys") && text.contains("not created yet"),
        "{text}"
    );
    let mut serve = procs::serve(&cfg);
    let admin = |method: reqwest::Method, path: &str, body: Value| {
        http.request(method, format!("{url}{path}"))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };
    let r = admin(
        reqwest::Method::POST,
        "/v1/tenants",
        json!({"name": "acme"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    let issued: Value = admin(reqwest::Method::POST, "/v1/keys", json!({"tenant": "acme"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = issued["key"]
        .as_str()
        .expect("the key, shown once")
        .to_owned();
    let call = |key: Option<String>| {
        let mut req = http
            .post(format!("{url}/v1/chat/completions"))
            .json(&chat("openai/gpt-4o-mini", false));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    assert_eq!(call(Some(key.clone())).await.unwrap().status(), 200);
    assert_eq!(call(None).await.unwrap().status(), 401);
    serve.stop();

    let keys_db = dir.0.join("data").join("keys.db");
    remove_db(&keys_db);
    let (status, log) = procs::serve_refused(&cfg);
    eprintln!("figure stores: deleted keys.db: {status}: {log}");
    assert!(!status.success());
    assert!(log.contains(&keys_db.display().to_string()), "{log}");
    assert!(
        log.contains("is missing") && log.contains("restore keys.db"),
        "{log}"
    );
    let (ok, text) = check_stores(&cfg);
    assert!(!ok && text.contains("keys.db is missing"), "{text}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_ledger_or_jobs_db_refuses_start_up() {
    let sim = sim(SimConfig::unlimited()).await;
    let Gateway {
        mut serve,
        url,
        cfg,
        dir,
    } = Gateway::start("stores-empty", &sim, "[trace]\nenabled = false\n");
    let http = client();
    let r = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    serve.stop();
    let (ok, text) = check_stores(&cfg);
    assert!(ok, "{text}");
    assert!(text.contains("every page read"), "{text}");

    let data = dir.0.join("data");
    for name in ["ledger.db", "jobs.db"] {
        let path = data.join(name);
        let kept = std::fs::read(&path).unwrap();
        // Truncated to 0 bytes, as a full disk or a careless `> file` does.
        std::fs::File::create(&path).unwrap();
        let (status, log) = procs::serve_refused(&cfg);
        eprintln!("figure stores: emptied {name}: {status}: {log}");
        assert!(!status.success());
        assert!(
            log.contains(&format!("{} is empty (0 bytes)", path.display())),
            "{log}"
        );
        let (ok, text) = check_stores(&cfg);
        assert!(!ok && text.contains("is empty (0 bytes)"), "{text}");
        std::fs::write(&path, kept).unwrap();
    }
    // Restored: it starts again.
    let mut serve = procs::serve(&cfg);
    stop(&mut serve, &http, &url).await;
    sim.shutdown().await;
}

/// Stops a gateway that just started: once it answers (its SIGTERM
/// handler is installed by then), SIGTERM, and a clean exit.
async fn stop(serve: &mut procs::Proc, http: &reqwest::Client, url: &str) {
    let r = http.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    serve.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_jobs_db_turns_readyz_not_ready_and_runs_no_job_twice() {
    const JOBS: u64 = 5;
    let sim = sim(SimConfig::unlimited()).await;
    // Short leases, so that a job whose outcome was not recorded would
    // be rescued (every second) and run again within the test.
    let rest = "[trace]\nenabled = false\n[jobs]\nlease_ms = 500\nheartbeat_ms = 100\n";
    let Gateway {
        mut serve,
        url,
        cfg,
        dir,
    } = Gateway::start("stores-damaged", &sim, rest);
    let http = client();
    stop(&mut serve, &http, &url).await;
    let jobs_db = dir.0.join("data").join("jobs.db");
    damage_index(&jobs_db, "jobs_finished").await;
    let (ok, text) = check_stores(&cfg);
    assert!(!ok && text.contains("damaged"), "{text}");

    let mut serve = procs::serve(&cfg);
    for n in 0..JOBS {
        let r = http
            .post(format!("{url}/v1/jobs"))
            .json(&json!({"queue": "default", "kind": "http",
                "payload": {"api": "slack", "method": "POST", "path": format!("/damaged/{n}")}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text().await);
    }
    let end = std::time::Instant::now() + procs::PATIENCE;
    let reasons = loop {
        let r = http.get(format!("{url}/readyz")).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        if status == 503 {
            break body["reasons"].to_string();
        }
        assert!(std::time::Instant::now() < end, "still ready: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(reasons.contains("job store is damaged"), "{reasons}");
    serve.wait_line("the job store is damaged");
    // Eight leases on: before, every expired lease was a job rescued and
    // run again.
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    let calls = sim.stats().api("slack").requests;
    eprintln!(
        "figure stores: damaged jobs.db: {JOBS} enqueued, {calls} calls upstream; readyz: {reasons}"
    );
    assert!(calls >= 1, "a run found the damage");
    assert!(
        calls <= JOBS,
        "jobs ran again: {calls} calls for {JOBS} jobs"
    );
    let r = http.get(format!("{url}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503, "stays not ready");
    drop(serve);
    sim.shutdown().await;
}
