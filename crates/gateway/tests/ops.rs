//! Health, readiness and metrics. (Readiness under a busy queue is in
//! `admission.rs`, where the queue is blocked.)

mod common;

use common::{Harness, chat};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::{Faults, Scope};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz_answer_when_idle() {
    let h = Harness::start().await;
    let res = h.get("/healthz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "ok");

    let res = h.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["reasons"], json!([]));
    h.stop().await;
}

/// One recorder serves the whole process, so this checks presence, not
/// exact counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_with_sluice_families() {
    let h = Harness::start().await;
    h.sim
        .set_faults(
            Scope::Model("throttled".into()),
            Faults {
                force_429: true,
                force_429_retry_after_ms: 10,
                ..Faults::none()
            },
        )
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    let res = h
        .send("/v1/chat/completions", &chat("openai/throttled"))
        .await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    res.bytes().await.unwrap();
    let res = h.send("/v1/chat/completions", &chat("nobody/x")).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);

    let res = h.get("/metrics").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let ctype = common::header(&res, "content-type");
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    let text = res.text().await.unwrap();
    for family in [
        "sluice_requests_total",
        "sluice_upstream_429_total",
        "sluice_retries_total",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family}")),
            "{family} missing from:\n{text}"
        );
        assert!(text.contains(&format!("# HELP {family}")), "{family} help");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("sluice_requests_total{") && l.contains("status=\"200\"")),
        "a 200 counted:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("sluice_requests_total{") && l.contains("status=\"400\"")),
        "a 400 counted:\n{text}"
    );
    h.stop().await;
}
