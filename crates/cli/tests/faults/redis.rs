//! Redis killed and started again under load, two replicas in distributed
//! mode, for `fail_open` and `fail_closed` (docs/distributed.md, "When
//! Redis fails"). A swarm runs against both replicas the whole time; the
//! sim counts what reached the upstream in each phase:
//!
//! - shared (before): within `burst + rate·t` of the one shared limit;
//! - Redis away, `fail_open`: each replica on its share (1/N), so together
//!   within `N·(burst/N + rate/N·t)`; `fail_closed`: nothing new is sent;
//! - Redis back: shared again, within `burst + rate·t`.
//!
//! The time from the kill to every replica degraded and from the restart
//! to every replica shared again is printed, not asserted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_sim::{Latency, Limits, ModelConfig, SimConfig, SimHandle};

pub(crate) use crate::common::all_ready;
use crate::procs::{self, Proc, TempDir};
use crate::{chat, client, sim, span, write_config};

pub(crate) const REPLICAS: usize = 2;
pub(crate) const RATE: f64 = 10.0;
pub(crate) const BURST: f64 = 10.0;
pub(crate) const CLIENTS: usize = 16;
/// Requests admitted just before a phase starts may reach the sim just
/// after: at most one per client.
pub(crate) const SLACK: f64 = CLIENTS as f64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_dies_and_returns_fail_open() {
    outage("fail_open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_dies_and_returns_fail_closed() {
    outage("fail_closed").await;
}

/// Statuses the swarm got, by code (0: no answer).
pub(crate) type Statuses = Arc<Mutex<BTreeMap<u16, u64>>>;

async fn outage(failure: &str) {
    let Ok(redis_bin) = std::env::var("SLUICE_TEST_REDIS_SERVER") else {
        eprintln!("note: SLUICE_TEST_REDIS_SERVER is not set; skipping (scripts/test sets it)");
        return;
    };
    let sim = sim_of_m().await;
    let dir = TempDir::new(&format!("redis-{failure}"));
    let redis_port = procs::free_port();
    let mut redis = redis_server(&redis_bin, redis_port);
    let http = client();
    let (replicas, urls) = replicas(&http, &dir, &sim, "faults", failure, |_| redis_port).await;

    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Statuses = Arc::default();
    let swarm = swarm(&http, &urls, &stop, &statuses);

    // 1. Shared.
    let (shared, secs) = window(&sim, span(Duration::from_secs(2))).await;
    let bound = BURST + RATE * secs;
    eprintln!(
        "figure redis {failure}: shared: {shared} admitted in {secs:.2} s (bound {bound:.1})"
    );
    assert!(shared as f64 <= bound + SLACK, "{shared} > {bound}");

    // 2. Redis dies.
    let t_kill = Instant::now();
    let before_kill = admitted(&sim);
    redis.kill();
    all_ready(&http, &urls, "every replica degraded", |r| {
        r["redis"]["degraded"] == true
    })
    .await;
    let detected = t_kill.elapsed();
    let in_detection = admitted(&sim) - before_kill;
    let (away, secs) = window(&sim, span(Duration::from_secs(3))).await;
    // Each replica's share: 1/N of the rate and of the burst.
    let share_rate = (RATE / REPLICAS as f64).floor().max(1.0);
    let share_burst = (BURST / REPLICAS as f64).floor().max(1.0);
    let bound = match failure {
        "fail_open" => REPLICAS as f64 * (share_burst + share_rate * secs),
        _ => 0.0,
    };
    eprintln!(
        "figure redis {failure}: every replica degraded {:.0} ms after the kill ({in_detection} admitted meanwhile); \
         away: {away} admitted in {secs:.2} s (bound {bound:.1})",
        detected.as_secs_f64() * 1e3
    );
    assert!(away as f64 <= bound + SLACK, "{away} > {bound}");
    if failure == "fail_open" {
        assert!(away > 0, "fail_open keeps serving");
    }

    // 3. Redis is back, empty.
    let before_back = admitted(&sim);
    let t_back = Instant::now();
    redis = redis_server(&redis_bin, redis_port);
    all_ready(&http, &urls, "every replica shared again", |r| {
        r["redis"]["degraded"] == false
    })
    .await;
    let recovered = t_back.elapsed();
    let in_recovery = admitted(&sim) - before_back;
    let (back, secs) = window(&sim, span(Duration::from_secs(2))).await;
    let bound = BURST + RATE * secs;
    eprintln!(
        "figure redis {failure}: every replica shared again {:.0} ms after the restart ({in_recovery} admitted meanwhile); \
         back: {back} admitted in {secs:.2} s (bound {bound:.1})",
        recovered.as_secs_f64() * 1e3
    );
    assert!(back as f64 <= bound + SLACK, "{back} > {bound}");
    assert!(back > 0, "shared limits serve again");

    stop_swarm(&stop, swarm, &statuses, &format!("redis {failure}")).await;
    drop(redis);
    drop(replicas);
    sim.shutdown().await;
}

/// The sim both fault suites of Redis run against: its model `m` answers
/// in 5 ms, unlimited.
pub(crate) async fn sim_of_m() -> SimHandle {
    sim_of_m_limited(Limits::unlimited()).await
}

/// The same, with `m` limited as `limits` says (429 beyond).
async fn sim_of_m_limited(limits: Limits) -> SimHandle {
    let mut config = SimConfig::unlimited();
    config.models.insert(
        "m".into(),
        ModelConfig {
            latency: Some(Latency {
                base_ms: 5,
                ..Latency::default()
            }),
            limits: Some(limits),
            ..ModelConfig::default()
        },
    );
    sim(config).await
}

/// 429s the sim answered for `m`.
fn refused_upstream(sim: &SimHandle) -> u64 {
    sim.stats().model("m").rate_limited
}

/// Upstream 429s from Redis's restart to 2 s after the replicas are
/// shared again, at most: see docs/reliability.md. The replicas switch
/// back together and hand back what their shares spent, so the shared
/// limit starts where the upstream's stands; what is left is the jitter
/// of requests on their way to an upstream run at its exact limit (the
/// shared phase alone sees 0–1 in 2 s). Measured 0–2; 9 before.
const RETURN_429S: u64 = 4;

/// Redis returns in `fail_open` under an upstream whose own limit is the
/// configured one (10/s, burst 10): the return must not cost upstream
/// 429s. Before (issue 34), the first replica to reconnect found a full
/// shared bucket (a restarted Redis is empty) and spent it at once on an
/// upstream the shares had just emptied, while the other was still on
/// its share: 19–20 upstream 429s within 0.55 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_returns_fail_open_without_a_burst_upstream() {
    let Ok(redis_bin) = std::env::var("SLUICE_TEST_REDIS_SERVER") else {
        eprintln!("note: SLUICE_TEST_REDIS_SERVER is not set; skipping (scripts/test sets it)");
        return;
    };
    let limits = Limits::per_second(RATE).burst(BURST as u32);
    let sim = sim_of_m_limited(limits).await;
    let dir = TempDir::new("redis-return");
    let redis_port = procs::free_port();
    let mut redis = redis_server(&redis_bin, redis_port);
    let http = client();
    let (replicas, urls) = replicas(&http, &dir, &sim, "return", "fail_open", |_| redis_port).await;
    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Statuses = Arc::default();
    let swarm = swarm(&http, &urls, &stop, &statuses);

    let before = refused_upstream(&sim);
    let (shared, secs) = window(&sim, span(Duration::from_secs(2))).await;
    let shared_429s = refused_upstream(&sim) - before;
    redis.kill();
    all_ready(&http, &urls, "every replica degraded", |r| {
        r["redis"]["degraded"] == true
    })
    .await;
    let (away, away_secs) = window(&sim, span(Duration::from_secs(3))).await;

    let before = refused_upstream(&sim);
    let t_back = Instant::now();
    redis = redis_server(&redis_bin, redis_port);
    all_ready(&http, &urls, "every replica shared again", |r| {
        r["redis"]["degraded"] == false
    })
    .await;
    let recovered = t_back.elapsed();
    let (back, back_secs) = window(&sim, span(Duration::from_secs(2))).await;
    let return_429s = refused_upstream(&sim) - before;
    eprintln!(
        "figure redis return: shared {shared} in {secs:.2} s ({shared_429s} upstream 429s); \
         away {away} in {away_secs:.2} s; shared again {:.0} ms after the restart; \
         back {back} in {back_secs:.2} s; upstream 429s from the restart on: {return_429s} \
         (bound {RETURN_429S})",
        recovered.as_secs_f64() * 1e3
    );
    assert!(back > 0, "shared limits serve again");
    assert!(
        return_429s <= RETURN_429S,
        "{return_429s} upstream 429s after Redis returned"
    );
    stop_swarm(&stop, swarm, &statuses, "redis return").await;
    drop(redis);
    drop(replicas);
    sim.shutdown().await;
}

/// `REPLICAS` gateways in front of `sim`, sharing the limit of `openai/m`
/// (`RATE`, `BURST`) in Redis under `{name}-{failure}:`, with `failure`
/// for when Redis is away; replica `i` reaches Redis on `redis_port(i)`.
/// Returns once every replica has seen the others: the processes and
/// their URLs.
pub(crate) async fn replicas(
    http: &reqwest::Client,
    dir: &TempDir,
    sim: &SimHandle,
    name: &str,
    failure: &str,
    redis_port: impl Fn(usize) -> u16,
) -> (Vec<Proc>, Vec<String>) {
    let mut replicas = Vec::new();
    let mut urls = Vec::new();
    for i in 0..REPLICAS {
        let via = redis_port(i);
        let rest = format!(
            r#"[trace]
enabled = false
[jobs]
enabled = false
[[models]]
prefix = "openai/m"
requests_per_second = {RATE}
burst = {BURST}
[redis]
url = "redis://127.0.0.1:{via}"
prefix = "{name}-{failure}:"
replica_id = "replica-{i}"
timeout_ms = 250
lease_ttl_ms = 2000
failure = "{failure}"
"#
        );
        let (cfg, url) = write_config(&dir.0, &format!("replica-{i}.toml"), &sim.url(), &rest);
        replicas.push(procs::serve(&cfg));
        urls.push(url);
    }
    all_ready(http, &urls, "every replica seen", |r| {
        r["redis"]["replicas"] == REPLICAS as u64
    })
    .await;
    (replicas, urls)
}

/// Stops the swarm and checks that its agents got only answers, refusals
/// and deadlines (printed as the figure `what`).
pub(crate) async fn stop_swarm(
    stop: &AtomicBool,
    swarm: Vec<tokio::task::JoinHandle<()>>,
    statuses: &Statuses,
    what: &str,
) {
    stop.store(true, Ordering::SeqCst);
    for t in swarm {
        t.await.unwrap();
    }
    let statuses = statuses.lock().unwrap().clone();
    eprintln!("figure {what}: statuses {statuses:?} ({CLIENTS} agents)");
    assert!(
        statuses.keys().all(|s| [200, 429, 503, 504].contains(s)),
        "only answers, refusals and deadlines: {statuses:?}"
    );
}

fn redis_server(bin: &str, port: u16) -> Proc {
    procs::redis_server(bin, port)
}

/// Calls of the model the sim has seen.
pub(crate) fn admitted(sim: &SimHandle) -> u64 {
    sim.stats().model("m").requests
}

/// What the sim saw during `dur`, and the seconds it really lasted.
pub(crate) async fn window(sim: &SimHandle, dur: Duration) -> (u64, f64) {
    let t0 = Instant::now();
    let before = admitted(sim);
    tokio::time::sleep(dur).await;
    (admitted(sim) - before, t0.elapsed().as_secs_f64())
}

/// `CLIENTS` agents over every replica until `stop`.
pub(crate) fn swarm(
    http: &reqwest::Client,
    urls: &[String],
    stop: &Arc<AtomicBool>,
    statuses: &Statuses,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|c| {
            let (http, urls, stop, statuses) =
                (http.clone(), urls.to_vec(), stop.clone(), statuses.clone());
            tokio::spawn(async move {
                let mut i = c;
                while !stop.load(Ordering::SeqCst) {
                    let url = &urls[i % urls.len()];
                    i += 1;
                    let status = http
                        .post(format!("{url}/v1/chat/completions"))
                        .header("x-sluice-timeout-ms", "300")
                        .json(&chat("openai/m", false))
                        .send()
                        .await
                        .map_or(0, |r| r.status().as_u16());
                    *statuses.lock().unwrap().entry(status).or_default() += 1;
                    if status != 200 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect()
}
