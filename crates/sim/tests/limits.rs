//! The upstreams' own limits: 429s with Retry-After, the providers'
//! rate-limit headers and error bodies, and a histogram that never shows
//! more than the limit allows. Rates are tiny so that no refill happens
//! during a test: the assertions count, they never time.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::{ApiConfig, Limits, SimConfig};

/// 0.001 requests/s: after the burst, nothing refills for 1000 s.
const TRICKLE: f64 = 0.001;

#[tokio::test]
async fn openai_burst_then_429_with_headers() {
    let sim = start(limited_model(
        "gpt-4o-mini",
        Limits::per_second(TRICKLE).burst(3),
    ))
    .await;
    for remaining in ["2", "1", "0"] {
        let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o-mini")).await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-ratelimit-limit-requests").unwrap(), "3");
        assert_eq!(
            header(&r, "x-ratelimit-remaining-requests").unwrap(),
            remaining
        );
        let reset = header(&r, "x-ratelimit-reset-requests").unwrap();
        assert!(reset.ends_with('s') && reset.len() > 1, "{reset}");
        assert!(header(&r, "retry-after").is_none());
    }
    let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o-mini")).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-ratelimit-remaining-requests").unwrap(), "0");
    let secs: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    let ms: u64 = header(&r, "retry-after-ms").unwrap().parse().unwrap();
    assert!(secs >= 1 && ms > 0 && ms <= secs * 1000, "{secs} {ms}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "requests");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(body["error"]["message"].is_string());
    // Another model of no configured limit is not affected.
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o")).await,
        200
    );
}

#[tokio::test]
async fn anthropic_429_headers_and_body() {
    let sim = start(limited_model(
        "claude-x",
        Limits::per_second(TRICKLE).burst(1),
    ))
    .await;
    let r = post(&sim, "/v1/messages", &message("claude-x")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "anthropic-ratelimit-requests-limit").unwrap(),
        "1"
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-requests-remaining").unwrap(),
        "0"
    );
    let reset = header(&r, "anthropic-ratelimit-requests-reset").unwrap();
    assert!(
        reset.len() == 20 && reset.ends_with('Z') && &reset[10..11] == "T",
        "{reset}"
    );
    let r = post(&sim, "/v1/messages", &message("claude-x")).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some() && header(&r, "retry-after-ms").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": body["error"]["message"]}})
    );
}

#[tokio::test]
async fn tokens_per_minute_limit_and_too_large() {
    let sim = start(limited_model(
        "m",
        Limits::unlimited().tokens_per_minute(100),
    ))
    .await;
    // 160 characters: 40 prompt tokens, plus 24 out = 64 per request.
    let long = "x".repeat(160);
    let req = json!({"model": "m", "messages": [{"role": "user", "content": long}]});
    let r = post(&sim, "/v1/chat/completions", &req).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit-tokens").unwrap(), "100");
    assert_eq!(header(&r, "x-ratelimit-remaining-tokens").unwrap(), "36");
    assert!(header(&r, "x-ratelimit-limit-requests").is_none());
    let r = post(&sim, "/v1/chat/completions", &req).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens");

    // Larger than the bucket: 429, but no Retry-After, since waiting would
    // not help.
    let huge = json!({"model": "m", "messages": [{"role": "user", "content": "y".repeat(1000)}]});
    let r = post(&sim, "/v1/chat/completions", &huge).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_none());
}

#[tokio::test]
async fn api_limit_429_with_retry_after_and_ietf_headers() {
    let mut config = SimConfig::unlimited();
    config.apis.insert(
        "slack".into(),
        ApiConfig {
            limits: Limits::per_second(TRICKLE).burst(2),
            ..Default::default()
        },
    );
    let sim = start(config).await;
    for _ in 0..2 {
        let r = post(&sim, "/slack/chat.postMessage", &json!({"text": "hi"})).await;
        assert_eq!(r.status(), 200);
        assert!(
            header(&r, "ratelimit")
                .unwrap()
                .starts_with("\"default\";r=")
        );
        assert_eq!(header(&r, "ratelimit-policy").unwrap(), "\"default\";q=2");
    }
    let r = post(&sim, "/slack/chat.postMessage", &json!({"text": "hi"})).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["ok"].clone(), body["error"].clone()),
        (json!(false), json!("rate_limited"))
    );
    // Other APIs have their own buckets.
    assert_eq!(status_of(&sim, "/github/x", &json!({})).await, 200);
}

#[tokio::test]
async fn a_storm_never_gets_more_than_the_burst() {
    let sim = start(limited_model(
        "gpt-4o",
        Limits::per_second(TRICKLE).burst(5),
    ))
    .await;
    let storm = (0..40).map(|_| {
        let sim = &sim;
        async move { status_of(sim, "/v1/chat/completions", &chat("gpt-4o")).await }
    });
    let statuses = futures_util::future::join_all(storm).await;
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 5);
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 35);
    let c = sim.stats().model("gpt-4o");
    assert_eq!(
        (c.requests, c.admitted, c.ok, c.rate_limited),
        (40, 5, 5, 35)
    );
    assert_eq!(c.admitted_per_second.total(), 5);
    assert!(c.admitted_per_second.max() <= 5);
}
