//! Three `sluice serve` processes on one Redis in front of `sluice sim`:
//! the limit holds for all of them together, a 429 at one reduces all, a
//! Redis outage fails open on each replica's share and shared limits
//! resume after it, and a replica killed holding in-flight slots gives
//! them back after the lease TTL.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::procs::redis_server;
use common::{Proc, TempDir, all_ready, free_port, get_json, post_json, sim_stats, wait_port};
use serde_json::{Value, json};

/// `sluice ARGS`, its log at `warn`.
fn sluice(args: &[&str]) -> Proc {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(args).env("SLUICE_LOG", "warn");
    common::procs::with_provider_keys(&mut c);
    Proc::spawn(c)
}

fn replica_config(dir: &std::path::Path, i: usize, port: u16, sim: u16, redis: u16) -> PathBuf {
    let path = dir.join(format!("replica-{i}.toml"));
    let text = format!(
        r#"listen = "127.0.0.1:{port}"
data_dir = "{data}"
[trace]
enabled = false
[[providers]]
name = "openai"
base_url = "http://127.0.0.1:{sim}/openai/v1"
[[models]]
prefix = "openai/"
requests_per_second = 10.0
burst = 10
[[models]]
prefix = "anthropic/"
requests_per_second = 10.0
burst = 10
max_in_flight = 2
[redis]
url = "redis://127.0.0.1:{redis}"
prefix = "cli-test:"
replica_id = "replica-{i}"
timeout_ms = 1000
lease_ttl_ms = 2000
failure = "fail_open"
"#,
        data = dir.join(format!("data-{i}")).display(),
    );
    std::fs::write(&path, text).expect("config written");
    path
}

/// The sim's count of answered and refused calls to `model`.
async fn sim_counts(http: &reqwest::Client, sim: u16, model: &str) -> (u64, u64) {
    let s = sim_stats(http, &format!("http://127.0.0.1:{sim}")).await;
    let m = &s["models"][model];
    (
        m["ok"].as_u64().unwrap_or(0),
        m["rate_limited"].as_u64().unwrap_or(0),
    )
}

/// `clients` agents spread over every replica for `dur`: (answered, refused
/// by the gateway, seconds from the first send to the last answer).
async fn swarm(
    http: &reqwest::Client,
    urls: &[String],
    clients: usize,
    dur: Duration,
) -> (u64, u64, f64) {
    let ok = Arc::new(AtomicU64::new(0));
    let limited = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, urls, ok, limited) = (http.clone(), urls.to_vec(), ok.clone(), limited.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = c;
            while t0.elapsed() < dur {
                let url = &urls[i % urls.len()];
                i += 1;
                let res = http
                    .post(format!("{url}/v1/chat/completions"))
                    .header("x-sluice-timeout-ms", "300")
                    .json(&json!({"model": "openai/gpt-4o-mini",
                        "messages": [{"role": "user", "content": "hi"}]}))
                    .send()
                    .await;
                match res.map(|r| r.status().as_u16()) {
                    Ok(200) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(429) | Ok(504) => {
                        limited.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Ok(s) => panic!("unexpected status {s}"),
                    Err(e) => panic!("request failed: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    (
        ok.load(Ordering::Relaxed),
        limited.load(Ordering::Relaxed),
        secs,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_limits_survive_redis_and_a_dead_replica() {
    let Ok(redis_bin) = std::env::var("SLUICE_TEST_REDIS_SERVER") else {
        eprintln!("note: SLUICE_TEST_REDIS_SERVER is not set; skipping (scripts/test sets it)");
        return;
    };
    let dir = TempDir::new("distributed");
    let redis_port = free_port();
    let mut redis = redis_server(&redis_bin, redis_port);
    // The upstream allows 20/s per model: 10/s through three replicas that
    // did not share their limit would be 30/s, and 429s.
    let sim_port = free_port();
    let sim_toml = dir.join("sim.toml");
    std::fs::write(
        &sim_toml,
        "seed = 7\n[providers.openai.limits]\nrequests_per_second = 20.0\nburst = 20\n[defaults.latency]\nbase_ms = 5\nttft_ms = 5\nper_token_ms = 0\n",
    )
    .unwrap();
    let _sim = sluice(&[
        "sim",
        "--listen",
        &format!("127.0.0.1:{sim_port}"),
        "--config",
        sim_toml.to_str().unwrap(),
    ]);
    wait_port(sim_port);
    let mut replicas = Vec::new();
    let mut urls = Vec::new();
    for i in 0..3 {
        let port = free_port();
        let cfg = replica_config(&dir.0, i, port, sim_port, redis_port);
        replicas.push(sluice(&["serve", "--config", cfg.to_str().unwrap()]));
        wait_port(port);
        urls.push(format!("http://127.0.0.1:{port}"));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    all_ready(&http, &urls, "three replicas seen", |r| {
        r["redis"]["replicas"] == 3
    })
    .await;

    // 1. Shared: 30 agents over three replicas.
    // Admitted is what reached the upstream (a call admitted late in its
    // deadline may still time out at the client).
    let (ok, limited, secs) = swarm(&http, &urls, 30, Duration::from_secs(2)).await;
    let bound = 10.0 + 10.0 * secs;
    let (admitted, sim_429) = sim_counts(&http, sim_port, "gpt-4o-mini").await;
    println!(
        "shared: {admitted} admitted ({ok} answered 200, {limited} refused) in {secs:.2} s (bound {bound:.1})"
    );
    assert!(admitted as f64 <= bound + 1.0, "{admitted} > {bound}");
    assert!(ok >= 10 && ok <= admitted);
    assert_eq!(sim_429, 0);

    // 2. 429s at replica 0 reduce replicas 1 and 2. A report is about a
    // call made under a grant the caller holds.
    let grant = |u: String| {
        let http = http.clone();
        async move {
            // A busy machine can time a Redis call out (fail open answers
            // without a grant): ask again rather than report on nothing.
            for _ in 0..20 {
                let body = json!({"model": "openai/gpt-4o"});
                let g = post_json(&http, &format!("{u}/v1/limits/acquire"), &body).await;
                if g["grant_id"].is_string() {
                    return g["grant_id"].clone();
                }
                println!("acquire at {u} gave no grant: {g}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("no grant from {u} in 20 tries")
        }
    };
    // One 429 is a timing collision (a pause, no cut): it takes 429s that
    // keep coming (`strikes`, 3 by default, each a while after the last)
    // to prove the limit lower and cut it, once, for every replica.
    let mut t0 = Instant::now();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        t0 = Instant::now();
        let res = http
            .post(format!("{}/v1/limits/report", urls[0]))
            .json(&json!({"grant_id": grant(urls[0].clone()).await, "status": 429}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    for u in &urls[1..] {
        // Used here once, the model is listed with its shared state.
        grant(u.clone()).await;
        loop {
            let all = get_json(&http, &format!("{u}/v1/limits")).await;
            let c = all["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["resource"] == "openai/gpt-4o")
                .cloned()
                .unwrap_or_default();
            if c["capacity"] == 5 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "{c}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!(
        "429 at replica 0 seen reduced by the others after {:?}",
        t0.elapsed()
    );

    // 3. Redis dies: each replica serves on its third of the limit.
    redis.kill();
    all_ready(&http, &urls, "degraded", |r| {
        r["redis"]["degraded"] == true && r["ready"] == true
    })
    .await;
    let before = sim_counts(&http, sim_port, "gpt-4o-mini").await;
    let (ok, limited, secs) = swarm(&http, &urls, 30, Duration::from_secs(2)).await;
    // 10/s burst 10 split three ways: 3/s burst 3 each.
    let bound = 3.0 * (3.0 + 3.0 * secs);
    let after = sim_counts(&http, sim_port, "gpt-4o-mini").await;
    let admitted = after.0 - before.0;
    println!(
        "redis down: {admitted} admitted ({ok} answered 200, {limited} refused) in {secs:.2} s (bound {bound:.1})"
    );
    assert!(ok >= 3, "fail open still serves");
    assert!(admitted as f64 <= bound + 3.0, "{admitted} > {bound}");
    assert_eq!(after.1, 0);

    // 4. Redis is back: shared limits resume.
    redis = redis_server(&redis_bin, redis_port);
    all_ready(&http, &urls, "not degraded", |r| {
        r["redis"]["degraded"] == false
    })
    .await;
    let before = sim_counts(&http, sim_port, "gpt-4o-mini").await;
    let (ok, limited, secs) = swarm(&http, &urls, 30, Duration::from_secs(2)).await;
    let bound = 10.0 + 10.0 * secs;
    let after = sim_counts(&http, sim_port, "gpt-4o-mini").await;
    let admitted = after.0 - before.0;
    println!(
        "redis back: {admitted} admitted ({ok} answered 200, {limited} refused) in {secs:.2} s (bound {bound:.1})"
    );
    assert!(admitted as f64 <= bound + 1.0, "{admitted} > {bound}");
    assert!(ok >= 10, "shared limits serve again: {ok}");
    assert_eq!(after.1, 0);

    // 5. kill -9 a replica holding both in-flight slots.
    let slots = "inflight:anthropic/";
    for _ in 0..2 {
        let res = http
            .post(format!("{}/v1/limits/acquire", urls[2]))
            .json(&json!({"resource": slots}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    let res = http
        .post(format!("{}/v1/limits/acquire", urls[0]))
        .json(&json!({"resource": slots}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429, "both slots are held");
    replicas[2].kill();
    let t0 = Instant::now();
    let res = http
        .post(format!("{}/v1/limits/acquire", urls[0]))
        .json(&json!({"resource": slots, "timeout_ms": 10000}))
        .send()
        .await
        .unwrap();
    let back = t0.elapsed();
    println!("kill -9: a slot came back after {back:?} (lease TTL 2 s)");
    assert_eq!(res.status(), 200);
    assert!(back >= Duration::from_millis(500), "{back:?}");
    drop(redis);
}

#[test]
fn bench_redis_reports_every_mode() {
    let Ok(url) = std::env::var("SLUICE_TEST_REDIS_URL") else {
        eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "redis", "--url", &url, "--duration", "300ms"])
        .args(["--replicas", "2", "--clients", "4", "--json"])
        .output()
        .expect("sluice runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for mode in ["naive", "exact", "leased"] {
        assert!(
            r[mode]["total_decisions_per_second"].as_f64().unwrap() > 0.0,
            "{mode}: {r}"
        );
        assert!(r[mode]["p99_ms"].is_number(), "{mode}");
        assert_eq!(r[mode]["replicas"].as_array().unwrap().len(), 2, "{mode}");
    }
    for mode in ["exact", "leased"] {
        let o = &r[mode]["over_admission"];
        // Counts, not timings: what was admitted stays within the bound.
        assert!(
            o["admitted"].as_u64().unwrap() as f64 <= o["bound"].as_f64().unwrap() + 1.0,
            "{o}"
        );
    }
    assert!(r["redis_benchmark"]["installed"].is_boolean());
}
