//! The usage ledger across `kill -9`: `sluice serve` is killed while
//! clients call models through it (`sluice sim` upstream), started again
//! on the same data directory (which writes back the spill file), and
//! killed again. Every record that survived is whole, and the records
//! lost are bounded by what the writer held in memory at the kill: its
//! queue (`[ledger] queue`), the batch being written, and the calls in
//! flight. The loss measured is printed.
//!
//! The size is `SLUICE_LEDGER_PROOF_CALLS` (default 2,000); the kill
//! comes after half the calls are answered.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{Serve, TempDir};
use serde_json::json;
use sluice_ledger::LedgerStore;
use sluice_sim::SimConfig;
use sluice_usage::{PriceTable, Usage};

const QUEUE: u64 = 1_000;
const BATCH: u64 = 256;
const CLIENTS: u64 = 32;
const MODELS: [&str; 2] = ["openai/gpt-4o-mini", "openai/gpt-4o"];

fn calls() -> u64 {
    std::env::var("SLUICE_LEDGER_PROOF_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_loses_at_most_what_its_writer_held_and_no_record_is_cut() {
    let n = calls();
    let sim = common::sim(SimConfig::unlimited()).await;
    let dir = TempDir::new("ledger-crash");
    let data = dir.join("data");
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            r#"data_dir = {data:?}
[trace]
enabled = false
[cache]
enabled = false
[ledger]
queue = {QUEUE}
batch = {BATCH}
[[providers]]
name = "openai"
base_url = "{sim}/openai/v1"
[[models]]
prefix = ""
requests_per_second = 100000.0
burst = 100000
"#,
            data = data.display().to_string(),
            sim = sim.url(),
        ),
    )
    .unwrap();
    let mut first = Serve::start(&config);
    let client = common::client_with(Duration::from_secs(30));
    let ok = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (client, url, ok, next) = (client.clone(), first.url.clone(), ok.clone(), next.clone());
        clients.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let body = json!({"model": MODELS[(i % 2) as usize], "stream": i % 3 == 0,
                    "messages": [{"role": "user", "content": format!("call {i}")}]});
                let Ok(res) = client
                    .post(format!("{url}/v1/chat/completions"))
                    .header("x-sluice-workspace", "crash")
                    .json(&body)
                    .send()
                    .await
                else {
                    // The server is gone: this client is done.
                    return;
                };
                if res.status() == 200 && res.bytes().await.is_ok() {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while ok.load(Ordering::Relaxed) < n / 2 && !clients.is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill();
    while clients.join_next().await.is_some() {}

    // Started again, the writer writes the spill file back; then killed
    // again once it has.
    let spill = data.join("ledger-spill.jsonl");
    let spilled_lines = std::fs::read_to_string(&spill)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let mut second = Serve::start(&config);
    for _ in 0..1_000 {
        let taken = spill.with_extension("jsonl.importing");
        if !spill.exists() && !taken.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    second.kill();

    let store = LedgerStore::open(data.join("ledger.db")).await.unwrap();
    let records = store.records("crash", 0, u32::MAX).await.unwrap();
    let stats = sim.stats();
    let served: u64 = ["gpt-4o-mini", "gpt-4o"]
        .iter()
        .map(|m| stats.model(m).ok)
        .sum();
    let stored = records.iter().filter(|(_, r)| r.status == 200).count() as u64;
    let lost = served.saturating_sub(stored);
    eprintln!(
        "kill -9 after {} answers: the sim served {served} calls, the ledger holds {stored} \
         ({spilled_lines} of them from the spill file): {lost} lost (bound {})",
        ok.load(Ordering::Relaxed),
        QUEUE + BATCH + CLIENTS,
    );
    assert!(stored <= served, "no record of a call that did not happen");
    assert!(
        lost <= QUEUE + BATCH + CLIENTS,
        "lost {lost}: more than the queue, a batch and the calls in flight"
    );
    // Every surviving record is whole: its figures agree with each other.
    let prices = PriceTable::defaults();
    let mut ids = std::collections::HashSet::new();
    for (_, r) in &records {
        assert!(MODELS.contains(&r.model.as_str()), "{r:?}");
        assert_eq!(
            (r.tenant.as_str(), r.kind.as_str()),
            ("crash", "model"),
            "{r:?}"
        );
        assert!(
            ids.insert(r.request_id.clone()),
            "one record per call: {r:?}"
        );
        if r.status == 200 {
            assert!(r.prompt_tokens > 0 && r.completion_tokens > 0, "{r:?}");
            let usage = Usage {
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                total_tokens: r.prompt_tokens + r.completion_tokens,
            };
            let cost = prices.cost(&r.model, &usage, 0).unwrap().nanodollars();
            assert_eq!(r.cost_nanos, cost, "{r:?}");
        }
    }
    sim.shutdown().await;
}
