//! Crash safety end to end: `sluice serve` is killed with SIGKILL while its
//! workers run jobs against `sluice sim`, started again on the same store,
//! and every job completes. The sim's log shows every job's call at least
//! once; calls made twice are bounded by the jobs that were running at the
//! kill (the queue's concurrency) or whose outcome awaited its commit
//! (four times the concurrency at most): at-least-once, nothing lost.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Serve, TempDir};
use serde_json::{Value, json};
use sluice_sim::SimConfig;

const JOBS: usize = 10_000;
const CONCURRENCY: usize = 50;
/// Calls a kill may repeat at most: the runs of the concurrency, and the
/// outcomes awaiting their commit (`QueueConfig::awaiting_commit`).
const REPEATABLE: usize = (1 + sluice_jobs::worker::DEFAULT_AWAITING_PER_SLOT) * CONCURRENCY;

/// The operator's token of this test's gateway (queue counts are the
/// admin's).
const ADMIN: &str = "crash-test-admin";

/// The completed jobs of the `default` queue.
async fn completed(client: &reqwest::Client, url: &str) -> u64 {
    let body: Value = client
        .get(format!("{url}/v1/queues"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("the gateway answers")
        .json()
        .await
        .expect("JSON");
    body["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["queue"] == "default")
        .map_or(0, |q| q["counts"]["completed"].as_u64().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_loses_no_job_and_repeats_only_those_in_flight() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Slack answers after 50 ms, so that jobs are in flight when the
    // server dies, and keeps a log of every call.
    let mut sim_config = SimConfig {
        log_capacity: 4 * JOBS,
        ..SimConfig::unlimited()
    };
    let slack = sim_config.apis.entry("slack".into()).or_default();
    slack.latency_ms = 50;
    let sim = common::sim(sim_config).await;

    let dir = TempDir::new("jobs-crash");
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            r#"data_dir = {data:?}
admin_token = {ADMIN:?}
[trace]
enabled = false
[[apis]]
name = "slack"
base_url = "{sim}/slack"
requests_per_second = 100000.0
burst = 100000
[jobs]
lease_ms = 2000
heartbeat_ms = 500
[jobs.queues.default]
concurrency = {CONCURRENCY}
rate = 100000.0
"#,
            data = dir.join("data").display().to_string(),
            sim = sim.url(),
        ),
    )
    .unwrap();

    let client = common::client();
    let mut first = Serve::start(&config);
    let enqueue_started = std::time::Instant::now();
    for batch in 0..JOBS / 1_000 {
        let jobs: Vec<Value> = (batch * 1_000..(batch + 1) * 1_000)
            .map(|n| {
                json!({
                    "queue": "default",
                    "kind": "http",
                    "payload": {"api": "slack", "method": "POST", "path": format!("/api/post/{n}")}
                })
            })
            .collect();
        let res = client
            .post(format!("{}/v1/jobs/batch", first.url))
            .json(&json!({"jobs": jobs}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            201,
            "{}",
            res.text().await.unwrap_or_default()
        );
    }

    let enqueue_took = enqueue_started.elapsed();

    // Kill it mid-run.
    let mut at_kill = 0;
    for _ in 0..3_000 {
        at_kill = completed(&client, &first.url).await;
        if at_kill >= (JOBS / 5) as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill();
    assert!(
        at_kill > 0 && at_kill < JOBS as u64,
        "killed mid-run: {at_kill} of {JOBS} had completed"
    );

    // Again on the same store: the rescuer takes back the dead server's
    // jobs once their leases run out, and everything completes.
    let second = Serve::start(&config);
    let mut done = 0;
    for _ in 0..6_000 {
        done = completed(&client, &second.url).await;
        if done == JOBS as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(done, JOBS as u64, "every job completes after the restart");

    let log = sim.log(0);
    assert!(!log.truncated, "the sim kept every call");
    let mut calls: HashMap<String, usize> = HashMap::new();
    for e in log.entries.iter().filter(|e| e.status == 200) {
        if let Some(n) = e.path.strip_prefix("/slack/api/post/") {
            *calls.entry(n.to_owned()).or_default() += 1;
        }
    }
    let missing: Vec<usize> = (0..JOBS)
        .filter(|n| !calls.contains_key(&n.to_string()))
        .collect();
    assert!(
        missing.is_empty(),
        "jobs whose call never happened: {missing:?}"
    );
    let repeated: usize = calls.values().map(|c| c - 1).sum();
    assert!(
        repeated <= REPEATABLE,
        "{repeated} calls repeated; at most the {REPEATABLE} in flight or awaiting their commit at the kill may be"
    );
    eprintln!(
        "crash test: {JOBS} jobs enqueued in {} batches in {:?}, killed at {at_kill} completed, {repeated} calls repeated after the restart",
        JOBS / 1_000,
        enqueue_took
    );
    drop(second);
    sim.shutdown().await;
}
