//! Upstream failures: retries on 5xx, a 502 when they run out, fallback
//! models, and 429s: reported to the limiter before any retry, their
//! Retry-After honoured through the limiter's pause, and capped.

mod common;

use std::time::Duration;

use common::{Harness, chat, expect_error, header, sim_config, wait_for};
use reqwest::StatusCode;
use serde_json::Value;
use sluice_sim::{Faults, Scope};

fn errors_every(n: u64) -> Faults {
    Faults {
        error_every: Some(n),
        ..Faults::none()
    }
}

fn always_429(retry_after_ms: u64) -> Faults {
    Faults {
        force_429: true,
        force_429_retry_after_ms: retry_after_ms,
        ..Faults::none()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_is_retried_and_the_retry_succeeds() {
    let h = Harness::start().await;
    let model = Scope::Model("flaky".into());
    h.sim.set_faults(model, errors_every(2)).unwrap();

    // Admitted #1 succeeds; #2 fails, so the second request needs #3.
    let first = h.send("/v1/chat/completions", &chat("openai/flaky")).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(header(&first, "x-sluice-attempts"), "1");
    let second = h.send("/v1/chat/completions", &chat("openai/flaky")).await;
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(header(&second, "x-sluice-attempts"), "2");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");

    let seen = h.sim.stats().model("flaky");
    assert_eq!((seen.requests, seen.server_errors, seen.ok), (3, 1, 2));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_attempt_fails_the_client_gets_a_502() {
    let h = Harness::start().await;
    h.sim
        .set_faults(Scope::Model("broken".into()), errors_every(1))
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/broken")).await;
    assert_eq!(header(&res, "x-sluice-attempts"), "3");
    let e = expect_error(res, 502, "bad_gateway").await;
    assert!(e["message"].as_str().unwrap().contains("3 attempts"), "{e}");
    let seen = h.sim.stats().model("broken");
    assert_eq!((seen.requests, seen.server_errors), (3, 3));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_primary_falls_back_to_the_next_model() {
    let h = Harness::with(sim_config(), |c| {
        c.fallbacks
            .insert("openai/gpt-4o".into(), vec!["openai/gpt-4o-mini".into()]);
    })
    .await;
    h.sim
        .set_faults(Scope::Model("gpt-4o".into()), errors_every(1))
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-model"), "openai/gpt-4o-mini");
    // Three on the primary, one on the fallback.
    assert_eq!(header(&res, "x-sluice-attempts"), "4");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["model"], "gpt-4o-mini");
    let stats = h.sim.stats();
    assert_eq!(stats.model("gpt-4o").server_errors, 3);
    assert_eq!(stats.model("gpt-4o-mini").ok, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_primary_falls_back_too() {
    let h = Harness::with(sim_config(), |c| {
        c.fallbacks
            .insert("openai/gpt-4o".into(), vec!["openai/gpt-4o-mini".into()]);
    })
    .await;
    h.sim
        .set_faults(Scope::Model("gpt-4o".into()), always_429(10))
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-model"), "openai/gpt-4o-mini");
    let stats = h.sim.stats();
    assert_eq!(stats.model("gpt-4o").rate_limited, 3);
    assert_eq!(stats.model("gpt-4o-mini").ok, 1);
    h.stop().await;
}

/// The order matters: the 429 reaches the limiter (capacity cut, resource
/// paused for the Retry-After) while the sim has seen one request only,
/// and the retry comes once the pause is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_cuts_capacity_before_the_retry_which_waits_out_the_pause() {
    let h = Harness::start().await;
    let scope = Scope::Model("m429".into());
    h.sim.set_faults(scope.clone(), always_429(1_000)).unwrap();
    let body = chat("openai/m429");
    let req = h.send("/v1/chat/completions", &body);
    let (res, paused) = tokio::join!(req, async {
        let paused = wait_for("the limiter pauses openai/m429", || async {
            h.resource("openai/m429")
                .await
                .filter(|r| r["paused_ms"].as_u64().is_some_and(|p| p > 0))
        })
        .await;
        // Still paused, so not retried yet: the sim has one request.
        assert_eq!(h.sim.stats().model("m429").requests, 1);
        // The retry, when it comes, gets through.
        h.sim.set_faults(scope.clone(), Faults::none()).unwrap();
        paused
    });
    assert_eq!(paused["reduced"], true, "{paused}");
    assert!(
        paused["capacity"].as_u64() < paused["configured"].as_u64(),
        "{paused}"
    );
    assert!(paused["paused_ms"].as_u64().unwrap() <= 1_000, "{paused}");

    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-attempts"), "2");
    let seen = h.sim.stats().model("m429");
    assert_eq!((seen.requests, seen.rate_limited, seen.ok), (2, 1, 1));
    let after = h.resource("openai/m429").await.expect("still reduced");
    assert_eq!(after["reduced"], true, "{after}");
    h.stop().await;
}

/// A Retry-After beyond `retry.max_retry_after_ms` (5 s here) is not
/// waited out: the client hears 429 at once, with the upstream's wait, and
/// so does the next client while the pause lasts, without a call upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_above_the_cap_is_a_fast_429() {
    let h = Harness::start().await;
    h.sim
        .set_faults(Scope::Model("paused".into()), always_429(60_000))
        .unwrap();
    let bound = Duration::from_secs(4);

    let res = tokio::time::timeout(
        bound,
        h.send("/v1/chat/completions", &chat("openai/paused")),
    )
    .await
    .expect("an answer without waiting out the Retry-After");
    let retry_after: u64 = header(&res, "retry-after").parse().unwrap();
    assert!(
        retry_after > 5,
        "the upstream's wait, not the cap: {retry_after}"
    );
    expect_error(res, 429, "rate_limited").await;
    assert_eq!(h.sim.stats().model("paused").requests, 1, "no retry");

    let res = tokio::time::timeout(
        bound,
        h.send("/v1/chat/completions", &chat("openai/paused")),
    )
    .await
    .expect("an answer without waiting out the pause");
    assert!(header(&res, "retry-after").parse::<u64>().unwrap() > 5);
    expect_error(res, 429, "rate_limited").await;
    assert_eq!(
        h.sim.stats().model("paused").requests,
        1,
        "the pause kept it from the sim"
    );
    h.stop().await;
}

/// An upstream slower than the request's deadline: 504, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_slower_than_the_deadline_is_a_504() {
    let mut sim = sim_config();
    let slow = sluice_sim::Latency {
        base_ms: 3_000,
        ..sluice_sim::Latency::default()
    };
    sim.models
        .insert("sluggish".into(), common::sim_model(slow, None));
    let h = Harness::with(sim, |_| {}).await;
    let res = tokio::time::timeout(
        Duration::from_secs(2),
        h.post("/v1/chat/completions", &chat("openai/sluggish"))
            .header("x-sluice-timeout-ms", "200")
            .send(),
    )
    .await
    .expect("an answer by the deadline, not the upstream's")
    .unwrap();
    expect_error(res, 504, "deadline_exceeded").await;
    assert_eq!(h.sim.stats().model("sluggish").requests, 1);
    h.stop().await;
}

/// The sim sends half a JSON body and drops the connection: the client
/// gets a 502, never half a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_upstream_is_a_502() {
    let h = Harness::start().await;
    let cut = Faults {
        disconnect_every: Some(1),
        ..Faults::none()
    };
    h.sim.set_faults(Scope::Model("cut".into()), cut).unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/cut")).await;
    expect_error(res, 502, "bad_gateway").await;
    assert!(h.sim.stats().model("cut").disconnects >= 1);
    h.stop().await;
}
