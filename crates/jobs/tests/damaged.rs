//! A damaged page in the job store (issue 34): enqueues and claims still
//! work, but no outcome can be recorded. Before, each job ran again every
//! time its lease expired (rescued, claimed, run, not recorded), for ever;
//! now the first outcome that finds the file damaged stops the pool
//! claiming and marks the store's health, which `/readyz` reports.

mod common;
#[path = "../../store/tests/shared/damage.rs"]
mod damage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, fast, limiter};
use damage::damage_index;
use serde_json::json;
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
use sluice_jobs::{JobId, JobStore, NewJob, SqliteStore, StoreConfig};

const JOBS: u64 = 5;
const LEASE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_store_stops_claiming_instead_of_running_jobs_again() {
    let dir = std::env::temp_dir().join(format!(
        "sluice-damaged-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.db");
    let store = SqliteStore::open(&path, StoreConfig::default())
        .await
        .unwrap();
    store.close().await;
    drop(store);
    // Only finished jobs have entries in this index: enqueues and claims
    // never touch it, every completion does.
    damage_index(&path, "jobs_finished").await;

    let store = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let batch = (0..JOBS)
        .map(|n| NewJob::new("q", "act", json!({"n": n})))
        .collect();
    store.enqueue_batch(batch).await.unwrap();
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let counted = Arc::clone(&runs);
    let handlers = Handlers::new().on(
        "act",
        handler_fn(move |job| {
            *counted.lock().unwrap().entry(job.id).or_default() += 1;
            async { Outcome::Completed(json!("done")) }
        }),
    );
    let pool = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q").unlimited().concurrency(10))
        .configure(|c| {
            fast(c);
            c.lease = LEASE;
            c.heartbeat = Duration::from_millis(100);
            c.rescue_every = Some(Duration::from_millis(50));
        })
        .start()
        .unwrap();
    let health = pool.health().clone();
    eventually("the pool finds the store damaged", || {
        let h = health.clone();
        async move { h.is_damaged() }
    })
    .await;
    let damage = health.damage().unwrap_or_default().to_owned();
    assert!(damage.contains("malformed"), "{damage}");
    // Several leases later: each expired lease was a job rescued and run
    // again, before.
    tokio::time::sleep(LEASE * 6).await;
    let runs = runs.lock().unwrap().clone();
    let total: u32 = runs.values().sum();
    assert!(total >= 1, "a run found the damage");
    assert!(
        runs.values().all(|n| *n == 1) && u64::from(total) <= JOBS,
        "jobs ran again: {runs:?}"
    );
    pool.shutdown(Duration::from_secs(1)).await;
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
