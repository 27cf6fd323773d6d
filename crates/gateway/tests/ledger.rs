//! The usage ledger through the gateway and `sluice sim`: every call
//! leaves one record; the ledger's token and cost totals equal what the
//! simulator itself served, exactly, with streams, failures, retries and
//! cache hits mixed in — and with a graceful shutdown in the middle.
//!
//! The proof's size is `SLUICE_LEDGER_PROOF_CALLS` (default 2,000, so that
//! the whole suite stays quick in debug builds; the 100,000-call figure in
//! docs/keys-and-usage.md is this test run with the variable set).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Harness, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::Config;
use sluice_ledger::{Granularity, LedgerStore, Query, Totals};
use sluice_sim::{Faults, ModelConfig, SimConfig};
use sluice_usage::PriceTable;

/// The models called: the gateway's name and the sim's (prefix stripped).
const MODELS: [(&str, &str); 4] = [
    ("openai/gpt-4o-mini", "gpt-4o-mini"),
    ("openai/gpt-4o", "gpt-4o"),
    ("anthropic/claude-3-5-haiku", "claude-3-5-haiku"),
    // Always fails: every attempt is a 5xx, the client gets an error.
    ("openai/gpt-4.1-nano", "gpt-4.1-nano"),
];

fn proof_calls() -> u64 {
    std::env::var("SLUICE_LEDGER_PROOF_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Faults: one call in five of gpt-4o fails once (the gateway retries
/// it), every call of gpt-4.1-nano fails.
fn sim() -> SimConfig {
    let mut sim = sim_config();
    let flaky = Faults {
        error_every: Some(5),
        error_statuses: vec![500, 503],
        ..Faults::default()
    };
    let broken = Faults {
        error_rate: 1.0,
        error_statuses: vec![500],
        ..Faults::default()
    };
    for (name, faults, out) in [("gpt-4o", flaky, 17), ("gpt-4.1-nano", broken, 5)] {
        sim.models.insert(
            name.into(),
            ModelConfig {
                faults: Some(faults),
                output_tokens: Some(out),
                ..ModelConfig::default()
            },
        );
    }
    sim
}

fn config(c: &mut Config) {
    c.retry.max_attempts = 3;
    c.shutdown.drain_timeout_ms = 5_000;
}

/// The body and route of call `i`: models in turn, one in three
/// streamed, Anthropic's model through both its own route and chat.
fn call(i: u64) -> (&'static str, Value) {
    let (model, _) = MODELS[(i % 4) as usize];
    let stream = i.is_multiple_of(3);
    // One in seven asks the same question at temperature 0: the response
    // cache answers it once it has the answer.
    let (text, temperature) = if i % 7 == 6 {
        ("the same question".to_owned(), 0.0)
    } else {
        (format!("question number {i}"), 0.7)
    };
    if model.starts_with("anthropic/") && i % 8 == 2 {
        let body = json!({"model": model, "max_tokens": 40, "stream": stream,
            "temperature": temperature,
            "messages": [{"role": "user", "content": text}]});
        return ("/v1/messages", body);
    }
    let body = json!({"model": model, "stream": stream, "user": format!("body-user-{}", i % 3),
        "temperature": temperature,
        "messages": [{"role": "user", "content": text}]});
    ("/v1/chat/completions", body)
}

/// What the clients saw.
#[derive(Debug, Default)]
struct Seen {
    ok: AtomicU64,
    failed: AtomicU64,
    /// Calls that got no answer (the gateway was gone).
    refused: AtomicU64,
}

/// Sends calls `0..n` to the gateway at `base` from `workers` concurrent
/// clients, counting what they see; a call the gateway no longer answers
/// is not sent again.
async fn drive(http: reqwest::Client, base: String, n: u64, workers: u64, seen: Arc<Seen>) {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (http, base, next, seen) = (http.clone(), base.clone(), next.clone(), seen.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let (route, body) = call(i);
                let mut req = http.post(format!("{base}{route}"));
                if route == "/v1/messages" {
                    // Anthropic's bodies have no `user`: the header names one.
                    req = req.header("x-sluice-user", "header-user");
                }
                let res = req
                    .header("x-sluice-workspace", format!("ledger-{}", w % 2))
                    .header(
                        "x-sluice-feature",
                        if i.is_multiple_of(2) {
                            "search"
                        } else {
                            "chat"
                        },
                    )
                    .json(&body)
                    .send()
                    .await;
                let Ok(res) = res else {
                    seen.refused.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let status = res.status();
                // Streams are read to their end.
                let whole = res.bytes().await.is_ok();
                if status == StatusCode::OK && whole {
                    seen.ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    seen.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// The tokens and cost the sim served: its own counters, priced.
fn served(h: &Harness) -> (u64, u64, u64) {
    let prices = PriceTable::defaults();
    let stats = h.sim.stats();
    let (mut prompt, mut completion, mut cost) = (0, 0, 0);
    for (model, sim_name) in MODELS {
        let c = stats.model(sim_name);
        let p = prices.price(model).expect("a priced model");
        // Whole nanodollars per token: the sum priced at once equals the
        // sum of the calls priced one by one.
        assert_eq!((p.input % 1_000, p.output % 1_000), (0, 0), "{model}");
        prompt += c.tokens_in;
        completion += c.tokens_out;
        cost += c.tokens_in * p.input / 1_000 + c.tokens_out * p.output / 1_000;
    }
    (prompt, completion, cost)
}

async fn ledger(h: &Harness) -> LedgerStore {
    LedgerStore::open(h.data_dir.join("ledger.db"))
        .await
        .expect("the ledger file")
}

async fn totals(store: &LedgerStore) -> Totals {
    store.totals(0, i64::MAX, None).await.unwrap()
}

/// The rollups sum to the raw records.
async fn rollups_agree(store: &LedgerStore, t: &Totals) {
    for g in [Granularity::Day, Granularity::Total] {
        let rows = store.usage(&Query::new(0, i64::MAX, g)).await.unwrap();
        let requests: u64 = rows.iter().map(|r| r.requests).sum();
        let prompt: u64 = rows.iter().map(|r| r.prompt_tokens).sum();
        let completion: u64 = rows.iter().map(|r| r.completion_tokens).sum();
        let cost: u64 = rows.iter().map(|r| r.cost_nanos).sum();
        assert_eq!(
            (requests, prompt, completion, cost),
            (
                t.records,
                t.prompt_tokens,
                t.completion_tokens,
                t.cost_nanos
            ),
            "{g} rollups"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledgers_totals_equal_what_the_simulator_served() {
    let n = proof_calls();
    let mut h = Harness::with(sim(), config).await;
    let seen = Arc::new(Seen::default());
    let started = std::time::Instant::now();
    drive(h.http.clone(), h.url(""), n, 32, seen.clone()).await;
    let elapsed = started.elapsed();
    // Read through the API while it runs: once the writer caught up, the
    // tenant's own rollups hold its calls.
    let res = h
        .get("/v1/usage?granularity=total&group_by=model,feature")
        .header("x-sluice-workspace", "ledger-0")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    h.shutdown().await;
    let (ok, failed) = (
        seen.ok.load(Ordering::Relaxed),
        seen.failed.load(Ordering::Relaxed),
    );
    eprintln!(
        "{n} calls in {elapsed:?} ({:.0}/s): {ok} answered, {failed} failed",
        n as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(ok + failed, n, "every call answered");
    assert!(failed >= n / 4, "gpt-4.1-nano always fails: {failed}");
    let store = ledger(&h).await;
    let t = totals(&store).await;
    assert_eq!(t.records, n, "one record per call");
    assert_eq!(
        (t.prompt_tokens, t.completion_tokens, t.cost_nanos),
        served(&h),
        "the ledger's tokens and cost are the simulator's own count"
    );
    rollups_agree(&store, &t).await;
    // Records say who and what: the body's user, the feature header, the
    // failed calls at zero tokens, nothing estimated (the sim reports
    // usage), cache hits at zero cost.
    let records = store.records("ledger-0", 0, 1_000_000).await.unwrap();
    assert!(!records.is_empty());
    for (_, r) in &records {
        let user = r.user.as_deref().unwrap_or_default();
        if r.endpoint == "/v1/messages" {
            assert_eq!(user, "header-user", "{r:?}");
        } else {
            assert!(user.starts_with("body-user-"), "{r:?}");
        }
        assert!(
            matches!(r.feature.as_deref(), Some("search" | "chat")),
            "{r:?}"
        );
        assert!(!r.estimated, "{r:?}");
        if r.model == "openai/gpt-4.1-nano" {
            assert!(
                r.status >= 500 && r.prompt_tokens == 0 && r.cost_nanos == 0,
                "{r:?}"
            );
            assert_eq!(r.retries, 2, "{r:?}");
        }
        if r.cache_hit {
            assert_eq!((r.prompt_tokens, r.cost_nanos), (0, 0), "{r:?}");
        }
    }
    assert!(
        records.iter().any(|(_, r)| r.cache_hit),
        "repeated questions hit the cache"
    );
    assert!(records.iter().any(|(_, r)| r.endpoint == "/v1/messages"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["tenant"], "ledger-0");
    assert!(
        body["rows"].as_array().is_some_and(|r| !r.is_empty()),
        "{body}"
    );
    h.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_in_the_middle_loses_nothing() {
    let n = proof_calls();
    let mut h = Harness::with(sim(), config).await;
    let seen = Arc::new(Seen::default());
    let load = tokio::spawn(drive(h.http.clone(), h.url(""), n, 32, seen.clone()));
    // Half the calls answered (a bounded wait: the load ends by itself).
    let answered = |s: &Seen| s.ok.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed);
    while answered(&seen) < n / 2 && !load.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    h.shutdown().await;
    load.await.unwrap();
    let ok = seen.ok.load(Ordering::Relaxed);
    let store = ledger(&h).await;
    let t = totals(&store).await;
    assert_eq!(
        (t.prompt_tokens, t.completion_tokens, t.cost_nanos),
        served(&h),
        "every token the simulator served is in the ledger"
    );
    let answered = store
        .usage(&Query::new(0, i64::MAX, Granularity::Total))
        .await
        .unwrap();
    let errors: u64 = answered.iter().map(|r| r.errors).sum();
    assert_eq!(
        t.records - errors,
        ok,
        "one successful record per answer the clients read whole"
    );
    assert!(ok < n, "the shutdown came in the middle: {ok} of {n}");
    h.sim.shutdown().await;
}

/// Streams record the cached input and reasoning output their provider
/// reported in its final usage, as whole answers do, and are priced with
/// the cached input at its own price: OpenAI chat (a reasoning model),
/// Anthropic's own route, and Anthropic translated to a chat stream. The
/// sim reports a prompt of 1,024 tokens and more as cached, all but its
/// last partial 128, and half of a reasoning model's completion as
/// reasoning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_record_the_cached_and_reasoning_tokens_reported() {
    let mut h = Harness::with(sim_config(), |_| {}).await;
    let long = |n: u32| format!("{n} {}", "word ".repeat(1_200));
    let calls = [
        (
            "/v1/chat/completions",
            json!({"model": "openai/o3-mini", "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": long(1)}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "openai/o3-mini", "stream": false,
            "messages": [{"role": "user", "content": long(2)}]}),
        ),
        (
            "/v1/messages",
            json!({"model": "anthropic/claude-3-5-haiku", "max_tokens": 40, "stream": true,
            "messages": [{"role": "user", "content": long(3)}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "anthropic/claude-3-5-haiku", "stream": true,
            "messages": [{"role": "user", "content": long(4)}]}),
        ),
    ];
    for (path, body) in &calls {
        let res = h
            .post(path, body)
            .header("x-sluice-workspace", "details")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path} {body}");
        res.bytes().await.unwrap();
    }
    h.shutdown().await;
    let store = ledger(&h).await;
    let records = store.records("details", 0, 100).await.unwrap();
    assert_eq!(records.len(), calls.len());
    let prices = PriceTable::defaults();
    for (_, r) in &records {
        assert!(!r.estimated, "{r:?}");
        assert!(r.prompt_tokens >= 1_024, "{r:?}");
        assert_eq!(
            r.cached_tokens,
            r.prompt_tokens - r.prompt_tokens % 128,
            "{r:?}"
        );
        let reasoning = if r.model == "openai/o3-mini" {
            r.completion_tokens / 2
        } else {
            0
        };
        assert_eq!(r.reasoning_tokens, reasoning, "{r:?}");
        let usage = sluice_usage::Usage {
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            total_tokens: r.prompt_tokens + r.completion_tokens,
        };
        let cost = prices.cost(&r.model, &usage, r.cached_tokens).unwrap();
        assert_eq!(r.cost_nanos, cost.nanodollars(), "{r:?}");
    }
    assert!(records.iter().any(|(_, r)| r.reasoning_tokens > 0));
    h.sim.shutdown().await;
}
