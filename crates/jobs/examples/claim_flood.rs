//! What a flood of future jobs costs the claims of ordinary ones: on a
//! SQLite file, `future` jobs scheduled a year out, each in a group of its
//! own (one tenant's batches of 1,000), then `claims` claims of 10 due jobs
//! of another tenant; prints the claim time (median, p99) with and without
//! the flood, side by side in one run.
//!
//! `cargo run --release -p sluice-jobs --example claim_flood -- [future] [claims]`

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_jobs::{Clock, JobStore, NewJob, SqliteStore, StoreConfig, SystemClock};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let future: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300_000);
    let claims: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let dir = std::env::temp_dir().join(format!("sluice-claim-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let quiet = measure(&dir.join("quiet.db"), 0, claims).await?;
    let flooded = measure(&dir.join("flooded.db"), future, claims).await?;
    println!("claim of 10 due jobs, SQLite file, {claims} claims:");
    println!(
        "  no future jobs:            median {:>9.3?}  p99 {:>9.3?}",
        quiet.0, quiet.1
    );
    println!(
        "  {future} future jobs, unique groups: median {:>9.3?}  p99 {:>9.3?}",
        flooded.0, flooded.1
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The median and p99 time of `claims` claims of 10 due jobs, with
/// `future` jobs a year out in groups of their own.
async fn measure(
    path: &std::path::Path,
    future: usize,
    claims: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let store = SqliteStore::open(path, StoreConfig::default()).await?;
    let later = SystemClock.now() + Duration::from_secs(365 * 86_400);
    for start in (0..future).step_by(1_000) {
        let batch = (start..(start + 1_000).min(future))
            .map(|i| {
                NewJob::new("q", "noop", json!({}))
                    .tenant("flood")
                    .group(format!("g{i}"))
                    .run_at(later)
            })
            .collect();
        store.enqueue_batch(batch).await?;
    }
    for start in (0..claims * 10).step_by(1_000) {
        let batch = (start..(start + 1_000).min(claims * 10))
            .map(|i| {
                NewJob::new("q", "noop", json!({}))
                    .tenant("acme")
                    .group(format!("a{}", i % 4))
            })
            .collect();
        store.enqueue_batch(batch).await?;
    }
    let mut times = Vec::with_capacity(claims);
    for _ in 0..claims {
        let start = Instant::now();
        let got = store.claim("q", "w", 10, Duration::from_secs(30)).await?;
        times.push(start.elapsed());
        assert_eq!(got.len(), 10, "every claim finds 10 due jobs");
    }
    store.close().await;
    times.sort_unstable();
    Ok((times[claims / 2], times[claims * 99 / 100]))
}
