//! Burn-down of no-op jobs on a SQLite file: enqueue in batches, then run
//! them all through a worker pool, and print jobs/s for both.
//!
//! `cargo run --release -p sluice-jobs --example burn -- [jobs] [concurrency] [full|normal]`
//!
//! The third argument is SQLite's `synchronous` level (`normal`, the
//! store's default, if left out).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
use sluice_jobs::{JobState, JobStore, NewJob, SqliteOptions, SqliteStore, StoreConfig};
use sluice_limit::{Limiter, Rules};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let jobs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let concurrency: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let full = args.next().is_some_and(|a| a == "full");
    let dir = std::env::temp_dir().join(format!("sluice-burn-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let options = SqliteOptions::file(dir.join("jobs.db")).full_sync(full);
    let store = Arc::new(SqliteStore::open_with(options, StoreConfig::default()).await?);

    let start = Instant::now();
    let mut n = 0;
    while n < jobs {
        let batch: Vec<NewJob> = (n..(n + 1_000).min(jobs))
            .map(|i| NewJob::new("burn", "noop", json!({"i": i})))
            .collect();
        n += batch.len() as u64;
        store.enqueue_batch(batch).await?;
    }
    let enqueue = start.elapsed();

    let handlers = Handlers::new().on(
        "noop",
        handler_fn(|_| async { Outcome::Completed(json!(null)) }),
    );
    let start = Instant::now();
    let pool = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new())?)
        .handlers(handlers)
        .queue(
            QueueConfig::new("burn")
                .unlimited()
                .concurrency(concurrency),
        )
        .configure(|c| c.poll = Duration::from_millis(5))
        .start()?;
    loop {
        let done = store
            .counts()
            .await?
            .iter()
            .find(|q| q.queue == "burn")
            .map_or(0, |q| q.counts.get(JobState::Completed));
        if done == jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let burn = start.elapsed();
    pool.shutdown(Duration::from_secs(5)).await;
    let rate = |d: Duration| jobs as f64 / d.as_secs_f64();
    println!(
        "sqlite file (synchronous={}), {jobs} no-op jobs: enqueue {:.0} jobs/s (batches of 1000), burn-down {:.0} jobs/s (concurrency {concurrency})",
        if full { "full" } else { "normal" },
        rate(enqueue),
        rate(burn)
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
