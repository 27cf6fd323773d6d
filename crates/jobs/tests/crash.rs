//! A worker crashes with jobs in flight: its pool is dropped with leases
//! held and its store closed, as a killed process would leave them. A new
//! pool on the reopened store file rescues them after lease expiry. Every
//! job completes; each has its effect at least once, and the repeats are
//! exactly the runs in flight at the crash: at-least-once, none lost.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{count, eventually, fast};
use serde_json::json;
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
use sluice_jobs::{JobId, JobState, JobStore, ListFilter, NewJob, SqliteStore, StoreConfig};
use sluice_limit::{Limiter, Rules};

const JOBS: u64 = 300;
const CONCURRENCY: usize = 10;
/// Runs whose effect a crash may repeat at most: those of the
/// concurrency, and those whose handlers returned and whose outcomes await
/// their commit (four times the concurrency by default).
const REPEATABLE: usize = (1 + sluice_jobs::worker::DEFAULT_AWAITING_PER_SLOT) * CONCURRENCY;
/// Jobs leased at most: those runs, and as many claimed ahead of a free
/// slot (the default prefetch), which have no effect yet.
const LEASED: usize = REPEATABLE + CONCURRENCY;

/// Effects by job: a handler "acts" (records its job), then takes a while
/// before it reports completion, so that a crash can fall in between.
type Effects = Arc<Mutex<HashMap<JobId, u32>>>;

fn acting(effects: &Effects) -> Handlers {
    let effects = Arc::clone(effects);
    Handlers::new().on(
        "act",
        handler_fn(move |job| {
            *effects.lock().unwrap().entry(job.id).or_default() += 1;
            async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Outcome::Completed(json!("done"))
            }
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loses_no_job_and_repeats_only_those_in_flight() {
    let dir = std::env::temp_dir().join(format!(
        "sluice-crash-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.db");
    let effects: Effects = Arc::default();

    let store = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let batch = (0..JOBS)
        .map(|n| NewJob::new("q", "act", json!({"n": n})))
        .collect();
    store.enqueue_batch(batch).await.unwrap();
    let first = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new()).unwrap())
        .handlers(acting(&effects))
        .queue(QueueConfig::new("q").unlimited().concurrency(CONCURRENCY))
        .configure(|c| {
            fast(c);
            c.lease = Duration::from_millis(400);
            c.heartbeat = Duration::from_millis(100);
            c.rescue_every = None;
        })
        .start()
        .unwrap();
    eventually("a third done", || async {
        count(&*store, "q", JobState::Completed).await >= JOBS / 3
    })
    .await;
    // The crash: no shutdown, every task gone at once, leases held.
    drop(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let in_flight: Vec<JobId> = store
        .list(&ListFilter {
            queue: Some("q".into()),
            state: Some(JobState::Running),
            limit: 1_000,
            ..ListFilter::default()
        })
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert!(in_flight.len() <= LEASED, "{}", in_flight.len());
    drop(store);

    // The restart: the same file, a new store and pool.
    let store = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let second = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new()).unwrap())
        .handlers(acting(&effects))
        .queue(QueueConfig::new("q").unlimited().concurrency(CONCURRENCY))
        .configure(|c| {
            fast(c);
            c.rescue_every = Some(Duration::from_millis(50));
        })
        .start()
        .unwrap();
    eventually("every job completed", || async {
        count(&*store, "q", JobState::Completed).await == JOBS
    })
    .await;
    second.shutdown(Duration::from_secs(5)).await;

    let jobs = store
        .list(&ListFilter {
            limit: 1_000,
            ..ListFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    assert_eq!(jobs.len() as u64, JOBS, "none lost");
    let effects = effects.lock().unwrap().clone();
    let mut repeated = Vec::new();
    for job in &jobs {
        assert_eq!(job.state, JobState::Completed);
        let n = effects.get(&job.id).copied().unwrap_or(0);
        assert!(n >= 1, "job {} completed without its effect", job.id);
        if n > 1 {
            repeated.push(job.id);
        }
        if in_flight.contains(&job.id) {
            assert_eq!(job.attempts, 2, "the lost run counts as an attempt");
        } else {
            assert_eq!((n, job.attempts), (1, 1), "job {} ran once", job.id);
        }
    }
    println!(
        "crash: {} jobs, {} in flight at the crash, {} effects repeated",
        JOBS,
        in_flight.len(),
        repeated.len()
    );
    assert!(repeated.iter().all(|id| in_flight.contains(id)));
    assert!(repeated.len() <= REPEATABLE);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two pools (two processes' worth: two stores on one file) share a queue
/// without a crash: every job runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pools_on_one_file_run_each_job_once() {
    let dir = std::env::temp_dir().join(format!(
        "sluice-two-pools-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.db");
    let effects: Effects = Arc::default();
    let a = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let b = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let batch = (0..200)
        .map(|n| NewJob::new("q", "act", json!({"n": n})))
        .collect();
    let pools: Vec<WorkerPool> = [&a, &b]
        .into_iter()
        .map(|store| {
            WorkerPool::builder(Arc::clone(store), Limiter::new(Rules::new()).unwrap())
                .handlers(acting(&effects))
                .queue(QueueConfig::new("q").unlimited().concurrency(CONCURRENCY))
                .configure(fast)
                .start()
                .unwrap()
        })
        .collect();
    // Both pools are polling before the jobs arrive, so that neither can
    // finish them all while the other is still starting.
    a.enqueue_batch(batch).await.unwrap();
    eventually("every job completed", || async {
        count(&*a, "q", JobState::Completed).await == 200
    })
    .await;
    // Usually both pools take part; on a starved machine one may claim
    // every batch before the other's first poll (seen once), which is no
    // fault: what matters is that no job ran twice and none was lost.
    let mut completed = Vec::new();
    for pool in pools {
        completed.push(pool.shutdown(Duration::from_secs(5)).await.completed);
    }
    eprintln!("completed by each pool: {completed:?}");
    assert_eq!(completed.iter().sum::<u64>(), 200);
    let effects = effects.lock().unwrap().clone();
    assert_eq!(effects.len(), 200);
    assert!(effects.values().all(|n| *n == 1), "no job ran twice");
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
