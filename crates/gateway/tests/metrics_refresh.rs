//! `/metrics` reads the gauges that cost a query (jobs by queue and state,
//! limiter tokens) at most once per `metrics.refresh_interval_ms`, however
//! often it is scraped.
//!
//! One test in this file on purpose: `sluice_metrics_refresh_total` is
//! process-wide, so no other gateway may run beside it.

mod common;

use std::time::Duration;

use common::{Harness, sim_config};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn job(queue: &str) -> Value {
    json!({
        "queue": queue,
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
            "body": {"channel": "C1", "text": "hello"}}
    })
}

async fn enqueue(h: &Harness, queue: &str) {
    let res = h
        .post("/v1/jobs", &job(queue))
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
}

/// The value of the series `line` starts with, if the text has it.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn available(text: &str, queue: &str) -> Option<f64> {
    value(
        text,
        &format!("sluice_jobs{{queue=\"{queue}\",state=\"available\"}}"),
    )
}

fn refreshes(text: &str) -> f64 {
    value(text, "sluice_metrics_refresh_total").unwrap_or(0.0)
}

async fn gateway(queue: &str, interval_ms: u64) -> Harness {
    let queue = queue.to_owned();
    Harness::with(sim_config(), move |c| {
        c.jobs.workers = false;
        c.jobs.queues.insert(queue, Default::default());
        c.metrics.refresh_interval_ms = interval_ms;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_share_one_refresh_per_interval() {
    // An hour: every scrape below falls in the first interval.
    let h = gateway("cached-q", 3_600_000).await;
    enqueue(&h, "cached-q").await;
    enqueue(&h, "cached-q").await;
    let first = h.metrics().await;
    assert_eq!(available(&first, "cached-q"), Some(2.0), "{first}");
    assert_eq!(refreshes(&first), 1.0, "{first}");
    // A third job, then 200 scrapes, 20 at a time: none reads the store.
    enqueue(&h, "cached-q").await;
    let texts: Vec<String> = futures_util::stream::iter(0..200)
        .map(|_| h.metrics())
        .buffer_unordered(20)
        .collect()
        .await;
    for text in &texts {
        assert_eq!(available(text, "cached-q"), Some(2.0), "cached: {text}");
    }
    let text = h.metrics().await;
    assert_eq!(refreshes(&text), 1.0, "one refresh for 202 scrapes");
    // Cheap in-memory gauges are still read at every scrape.
    assert!(
        text.contains("sluice_queue_depth{priority=\"normal\"} 0"),
        "{text}"
    );
    h.stop().await;

    // A short interval: the values catch up once it has passed.
    let h = gateway("fresh-q", 50).await;
    enqueue(&h, "fresh-q").await;
    let text = h.metrics().await;
    assert_eq!(available(&text, "fresh-q"), Some(1.0), "{text}");
    let before = refreshes(&text);
    enqueue(&h, "fresh-q").await;
    let mut scrapes = 0;
    let caught_up = loop {
        let text = h.metrics().await;
        scrapes += 1;
        if available(&text, "fresh-q") == Some(2.0) {
            break text;
        }
        assert!(scrapes < 500, "the count never caught up: {text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let runs = refreshes(&caught_up) - before;
    assert!(
        runs >= 1.0 && runs <= f64::from(scrapes),
        "{runs} refreshes, {scrapes} scrapes"
    );
    h.stop().await;
}
