//! PostgreSQL crashed (`pg_ctl stop -m immediate`) and started again under
//! job load. Enqueuers keep sending jobs the whole time; workers run them
//! against the sim's Slack, whose log shows every call.
//!
//! - An enqueue is answered 201 only for a job that was stored: every
//!   acknowledged job completes, its call made at least once.
//! - While the store is away enqueues are answered 503, never 201 or a
//!   cut connection; workers stop and go on once it is back.
//! - Calls made twice are counted; at most the jobs that were running at
//!   the crash (the queue's concurrency) may repeat.
//! - Jobs answered 503 that ran all the same are counted, not refused: a
//!   commit whose acknowledgement the crash lost is stored although the
//!   gateway could not know it (clients that retry send an
//!   `Idempotency-Key`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_sim::{ApiConfig, SimConfig};

use crate::procs::{self, Postgres};
use crate::{Gateway, client, sim, span};

const ENQUEUERS: usize = 2;
const CONCURRENCY: usize = 8;
const ADMIN: &str = "faults-pg-admin";

/// What one enqueue got: the job's path, the phase, the status (0: no
/// answer), the job id when stored.
#[derive(Clone, Debug)]
struct Sent {
    path: String,
    phase: &'static str,
    status: u16,
    id: Option<i64>,
    /// How long the answer took.
    took: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_crashes_and_returns_under_job_load() {
    let Some(pg) = Postgres::start() else { return };
    let mut config = SimConfig::unlimited();
    config.apis.insert(
        "slack".into(),
        ApiConfig {
            latency_ms: 20,
            ..ApiConfig::default()
        },
    );
    config.log_capacity = 200_000;
    let sim = sim(config).await;
    let rest = format!(
        r#"admin_token = "{ADMIN}"
[trace]
enabled = false
[jobs]
store = "{store}"
lease_ms = 2000
heartbeat_ms = 500
[jobs.queues.default]
concurrency = {CONCURRENCY}
rate = 100000.0
"#,
        store = pg.url()
    );
    let Gateway {
        serve,
        url,
        dir: _dir,
        ..
    } = Gateway::start("postgres", &sim, &rest);
    let http = client();

    let phase: Arc<Mutex<&'static str>> = Arc::new(Mutex::new("before"));
    let stop = Arc::new(AtomicBool::new(false));
    let sent: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let tasks: Vec<_> = (0..ENQUEUERS)
        .map(|e| {
            let (http, url, phase, stop, sent) = (
                http.clone(),
                url.clone(),
                phase.clone(),
                stop.clone(),
                sent.clone(),
            );
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let path = format!("/job/{e}-{n}");
                    let now = *phase.lock().unwrap();
                    let t0 = Instant::now();
                    let res = http
                        .post(format!("{url}/v1/jobs"))
                        .json(&json!({"queue": "default", "kind": "http",
                            "payload": {"api": "slack", "method": "POST", "path": path}}))
                        .send()
                        .await;
                    let (status, id) = match res {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let v: Value = r.json().await.unwrap_or(Value::Null);
                            (status, v["id"].as_i64())
                        }
                        Err(_) => (0, None),
                    };
                    sent.lock().unwrap().push(Sent {
                        path: format!("/slack{path}"),
                        phase: now,
                        status,
                        id,
                        took: t0.elapsed(),
                    });
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        })
        .collect();

    tokio::time::sleep(span(Duration::from_secs(2))).await;
    let completed_before = completed(&http, &url).await;
    *phase.lock().unwrap() = "away";
    pg.crash();
    tokio::time::sleep(span(Duration::from_secs(3))).await;
    let calls_while_away_start = slack_calls(&sim);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls_while_away = slack_calls(&sim) - calls_while_away_start;
    *phase.lock().unwrap() = "back";
    let t_back = Instant::now();
    pg.up();
    // Workers go on: the first job completed after the restart.
    let end = Instant::now() + procs::PATIENCE;
    let mut resumed = None;
    let base = completed(&http, &url).await;
    while resumed.is_none() {
        let now = completed(&http, &url).await;
        if now.is_some_and(|n| base.is_none_or(|b| n > b)) {
            resumed = Some(t_back.elapsed());
        }
        assert!(Instant::now() < end, "workers never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(span(Duration::from_secs(2))).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let sent = sent.lock().unwrap().clone();
    let t_wait = Instant::now();

    // Every acknowledged job completes.
    let acked: Vec<&Sent> = sent.iter().filter(|s| s.status == 201).collect();
    let ids = acked.iter().map(|s| s.id.expect("a 201 carries the id"));
    crate::until_completed(&http, &url, ids).await;
    eprintln!(
        "figure postgres: every acknowledged job completed {:?} after the load stopped",
        t_wait.elapsed()
    );
    let slowest_503 = sent
        .iter()
        .filter(|s| s.status == 503)
        .map(|s| s.took)
        .max()
        .unwrap_or_default();
    eprintln!("figure postgres: slowest 503 took {slowest_503:?}");
    let mut calls: HashMap<String, usize> = HashMap::new();
    let log = sim.log(0);
    assert!(!log.truncated, "the sim kept every call");
    for e in log.entries.iter().filter(|e| e.status == 200) {
        *calls.entry(e.path.clone()).or_default() += 1;
    }
    let missing: Vec<&str> = acked
        .iter()
        .filter(|s| !calls.contains_key(&s.path))
        .map(|s| s.path.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged jobs never called: {missing:?}"
    );
    let repeated: usize = calls.values().map(|c| c - 1).sum();
    // Refused, yet run: a job stored whose answer did not say so.
    let refused_but_run = sent
        .iter()
        .filter(|s| s.status != 201 && calls.contains_key(&s.path))
        .count();

    let count = |phase: &str| {
        let mut m: std::collections::BTreeMap<u16, usize> = Default::default();
        for s in sent.iter().filter(|s| s.phase == phase) {
            *m.entry(s.status).or_default() += 1;
        }
        m
    };
    let away = count("away");
    eprintln!(
        "figure postgres: {} enqueues, {} acknowledged, all completed; before {:?}, away {away:?}, back {:?}; \
         {calls_while_away} calls in 0.5 s while away; workers resumed {:.0} ms after the restart \
         (completed before the crash: {completed_before:?}); {repeated} calls repeated; {refused_but_run} refused yet run",
        sent.len(),
        acked.len(),
        count("before"),
        count("back"),
        resumed.unwrap().as_secs_f64() * 1e3,
    );
    assert!(
        away.keys().all(|s| [201, 503].contains(s)),
        "while the store is away, enqueues are 503 (or 201 if stored): {away:?}"
    );
    assert!(away.contains_key(&503), "the outage was seen: {away:?}");
    assert_eq!(calls_while_away, 0, "workers pause while the store is away");
    assert!(
        repeated <= CONCURRENCY,
        "{repeated} calls repeated; at most the {CONCURRENCY} running at the crash may be"
    );
    drop(serve);
    drop(pg);
    sim.shutdown().await;
}

/// The completed jobs of the `default` queue (`None` while the store is
/// away).
async fn completed(http: &reqwest::Client, url: &str) -> Option<u64> {
    let res = http
        .get(format!("{url}/v1/queues"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .ok()?;
    let body: Value = res.json().await.ok()?;
    body["queues"]
        .as_array()?
        .iter()
        .find(|q| q["queue"] == "default")
        .and_then(|q| q["counts"]["completed"].as_u64())
}

fn slack_calls(sim: &sluice_sim::SimHandle) -> u64 {
    sim.stats().api("slack").requests
}
