//! Single flight: requests with the same id while the first is in flight
//! get its answer, not a second upstream call.

mod common;

use common::{Harness, chat, header, sim_config, sim_model, wait_until};
use reqwest::StatusCode;
use sluice_sim::Latency;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_requests_with_one_id_make_one_upstream_call() {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 300,
        ..Latency::default()
    };
    sim.models.insert("dedup".into(), sim_model(slow, None));
    let h = Harness::with(sim, |_| {}).await;
    let send = || {
        h.post("/v1/chat/completions", &chat("openai/dedup"))
            .header("x-request-id", "same-id-1")
            .send()
    };

    let first = send();
    let second = async {
        // The first is at the sim, which takes 300 ms to answer.
        wait_until("the first request reaches the sim", || async {
            h.sim.stats().model("dedup").requests == 1
        })
        .await;
        send().await
    };
    let (first, second) = tokio::join!(first, second);
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(header(&first, "x-request-id"), "same-id-1");
    assert_eq!(header(&second, "x-request-id"), "same-id-1");
    let (a, b) = (first.bytes().await.unwrap(), second.bytes().await.unwrap());
    assert!(!a.is_empty());
    assert_eq!(a, b, "both got the one answer");
    assert_eq!(h.sim.stats().model("dedup").requests, 1);

    // Once it is answered, the id may run again (it is not a cache).
    let third = send().await.unwrap();
    assert_eq!(third.status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("dedup").requests, 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_deduplicates_as_well() {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 300,
        ..Latency::default()
    };
    sim.models.insert("idem".into(), sim_model(slow, None));
    let h = Harness::with(sim, |_| {}).await;
    let send = || {
        h.post("/v1/chat/completions", &chat("openai/idem"))
            .header("idempotency-key", "key-1")
            .send()
    };
    let second = async {
        wait_until("the first request reaches the sim", || async {
            h.sim.stats().model("idem").requests == 1
        })
        .await;
        send().await
    };
    let (first, second) = tokio::join!(send(), second);
    let (a, b) = (
        first.unwrap().bytes().await.unwrap(),
        second.unwrap().bytes().await.unwrap(),
    );
    assert_eq!(a, b);
    assert_eq!(h.sim.stats().model("idem").requests, 1);
    h.stop().await;
}
