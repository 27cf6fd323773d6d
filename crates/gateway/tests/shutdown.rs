//! Shutdown: requests in flight and running jobs drain together, within
//! one grace (`shutdown.drain_timeout_ms`), not one grace after the other,
//! and a job cut by the end of it goes back to its queue unspent.

mod common;

use common::{Harness, sim_config, sim_model, wait_until};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_jobs::{JobId, JobState, JobStore, SqliteStore, StoreConfig};
use sluice_sim::Latency;

/// Longer than any grace here: the call and the job outlast it.
const SLOW_MS: u64 = 60_000;

/// The grace. The harness waits 10 s at most for the gateway to stop: one
/// grace fits with room to spare, two graces one after the other do not.
const GRACE_MS: u64 = 6_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_and_a_job_share_one_grace_and_the_job_goes_back_unspent() {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: SLOW_MS,
        ..Latency::default()
    };
    sim.models.insert("slow".into(), sim_model(slow, None));
    sim.apis
        .get_mut("slack")
        .expect("the sim has slack")
        .latency_ms = SLOW_MS;
    let mut h = Harness::with(sim, |c| {
        c.shutdown.drain_timeout_ms = GRACE_MS;
        c.default_timeout_ms = 2 * SLOW_MS;
        c.retry.attempt_timeout_ms = 2 * SLOW_MS;
    })
    .await;

    // A job whose call outlasts the grace, running.
    let res = h
        .post(
            "/v1/jobs",
            &json!({
                "queue": "default",
                "kind": "http",
                "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
                            "body": {"text": "slow"}}
            }),
        )
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    wait_until("the job's call reaches slack", || async {
        h.sim.stats().api("slack").requests == 1
    })
    .await;

    // A model call that outlasts it too, in flight.
    let call = tokio::spawn({
        let req = h.post(
            "/v1/chat/completions",
            &json!({"model": "openai/slow", "messages": [{"role": "user", "content": "hi"}]}),
        );
        async move { req.send().await }
    });
    wait_until("the call reaches the model", || async {
        h.sim.stats().model("slow").requests == 1
    })
    .await;

    // Both are cut at the end of the one grace (the harness fails the
    // test if the gateway takes more than 10 s to stop).
    h.shutdown().await;
    let cut = call.await.expect("the call's task");
    assert!(
        cut.is_err() || cut.as_ref().is_ok_and(|r| !r.status().is_success()),
        "a call cut by the end of the grace does not succeed: {cut:?}"
    );

    // The job went back to its queue with no attempt used.
    let store = SqliteStore::open(&h.data_dir.join("jobs.db"), StoreConfig::default())
        .await
        .expect("the job store opens after the gateway stopped");
    let job = store
        .get(JobId(id))
        .await
        .unwrap()
        .expect("the job is kept");
    assert_eq!(job.state, JobState::Scheduled, "due again at once: {job:?}");
    assert_eq!(
        job.attempts, 0,
        "a released job keeps its attempts: {job:?}"
    );
    assert!(job.lease.is_none(), "{job:?}");
    assert!(
        job.last_error
            .as_deref()
            .is_some_and(|e| e.contains("released at worker shutdown")),
        "{job:?}"
    );
    store.close().await;
}

/// Every serving thread (`http.threads`) stops accepting and drains what
/// it is serving within the grace: calls in flight on connections of
/// their own, spread over the threads that accepted them, all finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_serving_thread_drains_its_requests_in_flight() {
    const CALLS: u64 = 8;
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 1_500,
        ..Latency::default()
    };
    sim.models.insert("slow".into(), sim_model(slow, None));
    let mut h = Harness::with(sim, |c| {
        c.http.threads = 4;
        c.shutdown.drain_timeout_ms = GRACE_MS;
    })
    .await;
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            // A client each: a connection each, accepted by whichever
            // thread is free.
            let req = reqwest::Client::new()
                .post(h.url("/v1/chat/completions"))
                .json(&json!({"model": "openai/slow", "messages": [{"role": "user", "content": "hi"}]}));
            tokio::spawn(async move { req.send().await })
        })
        .collect();
    wait_until("every call reaches the model", || async {
        h.sim.stats().model("slow").requests == CALLS
    })
    .await;
    h.shutdown().await;
    for call in calls {
        let res = call.await.expect("the call's task").expect("an answer");
        assert_eq!(res.status(), StatusCode::OK, "drained, not cut");
    }
}
