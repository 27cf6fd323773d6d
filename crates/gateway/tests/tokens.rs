//! Tokens per minute: an estimate is reserved before dispatch and settled
//! with the real usage after, so concurrent requests never push the
//! provider past its token quota.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{Harness, ModelLimits, chat, model_limits, sim_config, sim_model, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::{Latency, Limits, ModelConfig};

/// The gateway reserves, per request below, 3 (request) + 4 (message) + 3
/// ("hello there", 11 characters at 4 a token) prompt tokens plus its
/// `max_tokens` of 20: 30. The sim charges what it serves: 3 + 20 = 23.
const RESERVED: u64 = 30;
const TPM: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_never_exceed_the_providers_token_quota() {
    let mut sim = sim_config();
    sim.models.insert(
        "tpm".into(),
        ModelConfig {
            limits: Some(Limits::unlimited().tokens_per_minute(TPM)),
            ..ModelConfig::default()
        },
    );
    let h = Arc::new(
        Harness::with(sim, |c| {
            c.queue.concurrency = std::num::NonZeroUsize::new(32).unwrap();
            c.models.push(ModelLimits {
                tokens_per_minute: Some(TPM),
                ..model_limits("openai/tpm")
            });
        })
        .await,
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let h = Arc::clone(&h);
            tokio::spawn(async move {
                let mut body = chat("openai/tpm");
                body["max_tokens"] = json!(20);
                let res = h
                    .post("/v1/chat/completions", &body)
                    .header("x-sluice-timeout-ms", "1000")
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                let body: Value = res.json().await.unwrap();
                (status, body)
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            StatusCode::OK => {
                ok += 1;
                assert_eq!(body["usage"]["total_tokens"], 23, "{body}");
            }
            // Refused by the gateway's limiter: it will not fit in time.
            StatusCode::TOO_MANY_REQUESTS | StatusCode::GATEWAY_TIMEOUT => {
                let code = body["error"]["code"].as_str().unwrap_or_default();
                assert!(
                    code == "rate_limited" || code == "deadline_exceeded",
                    "{body}"
                );
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let seen = h.sim.stats().model("tpm");
    assert_eq!(seen.rate_limited, 0, "the sim never had to refuse");
    assert_eq!(seen.ok, ok);
    // The bucket holds TPM and refills TPM per minute; one settle may
    // overshoot by at most one request's reservation.
    let refill = (TPM as f64 * elapsed / 60.0).ceil() as u64;
    let served = seen.tokens_in + seen.tokens_out;
    assert!(
        served <= TPM + RESERVED + refill,
        "served {served} tokens in {elapsed:.1}s"
    );
    assert!(ok >= 9, "the quota's worth went through: {ok}");
    assert!(ok < 16, "the limit bound: all 16 went through");
    Arc::try_unwrap(h).unwrap().stop().await;
}

/// Big enough for the reservations below, slow enough to refill (100
/// tokens a second) that only a settle can give 2000 back at once.
const BIG: u64 = 6_000;

/// While a call runs its estimate is held (`max_tokens` 2000 here); when it
/// ends only what it used stays taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reservation_is_settled_with_the_real_usage() {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 300,
        ..Latency::default()
    };
    sim.models.insert("settle".into(), sim_model(slow, None));
    let h = Harness::with(sim, |c| {
        c.models.push(ModelLimits {
            tokens_per_minute: Some(BIG),
            ..model_limits("openai/settle")
        });
    })
    .await;
    let mut body = chat("openai/settle");
    body["max_tokens"] = json!(2_000);
    let req = h.send("/v1/chat/completions", &body);
    let (res, during) = tokio::join!(req, async {
        wait_for("the estimate is reserved", || async {
            h.resource("tokens:openai/settle")
                .await
                .and_then(|r| r["available"].as_f64())
                .filter(|a| *a <= (BIG - 2_000) as f64)
        })
        .await
    });
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    let used = body["usage"]["total_tokens"].as_u64().unwrap();
    assert!(used < 100, "a short answer: {used}");

    let after = h
        .resource("tokens:openai/settle")
        .await
        .and_then(|r| r["available"].as_f64())
        .unwrap_or(BIG as f64);
    // Settling gives back about 2000 − used; refill only adds to that.
    assert!(
        after >= during + 1_900.0 - used as f64,
        "available {during} during the call, {after} after"
    );
    assert!(after <= BIG as f64);
    h.stop().await;
}

/// Streams settle too, with the usage chunk the gateway asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_settles_with_its_final_usage() {
    let h = Harness::with(sim_config(), |c| {
        c.models.push(ModelLimits {
            tokens_per_minute: Some(BIG),
            ..model_limits("openai/streamed")
        });
    })
    .await;
    let mut body = chat("openai/streamed");
    body["max_tokens"] = json!(5_000);
    body["stream"] = json!(true);
    // The estimate (5010) nearly empties the bucket; at 100 tokens a
    // second it would take 40 s to refill what a settle gives back.
    let res = h.send("/v1/chat/completions", &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap();
    common::wait_until("the stream's tokens are settled", || async {
        h.resource("tokens:openai/streamed")
            .await
            .and_then(|r| r["available"].as_f64())
            .is_none_or(|a| a >= (BIG - 500) as f64)
    })
    .await;
    h.stop().await;
}
