//! The store suite on SQLite files, and what only a file can show:
//! durability across a reopen.

mod suite;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use sluice_jobs::{
    JobState, JobStore, ManualClock, SqliteOptions, SqliteStore, StoreConfig, Tally,
};
use suite::{Factory, T0, claim_one, enqueue, job};

/// A path for a new database file under cargo's scratch directory, with
/// any file a previous run left there removed.
fn fresh_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sluice-jobs");
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    let path = dir.join(format!("{name}-{}-{n}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    path
}

struct SqliteFile;

impl Factory for SqliteFile {
    type Store = SqliteStore;

    async fn make(&self, clock: ManualClock) -> SqliteStore {
        let path = fresh_path("suite");
        SqliteStore::open(&path, StoreConfig::default().clock(clock))
            .await
            .expect("open SQLite")
    }

    fn tally(store: &SqliteStore) -> Tally {
        store.tally()
    }
}

suite::store_tests!(SqliteFile);

/// The suite again on an [`AnyStore`](sluice_jobs::AnyStore) over the
/// same database: the backend chosen at run time (the gateway's) behaves
/// as the store it holds.
mod any_store {
    use super::*;

    suite::store_tests!(suite::Any(SqliteFile));
}

#[tokio::test]
async fn reopened_file_keeps_every_job() {
    let path = fresh_path("durable");
    let clock = ManualClock::new(T0);
    let config = StoreConfig::default().clock(clock.clone());
    let store = SqliteStore::open(&path, config.clone()).await.unwrap();
    let running = enqueue(&store, job("q")).await;
    let keyed = enqueue(&store, job("q").idempotency_key("k")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    store.pause("q").await.unwrap();
    store.close().await;
    drop(store);

    let store = SqliteStore::open(&path, config).await.unwrap();
    assert_eq!(
        store.get(running.id).await.unwrap().unwrap().lease,
        Some(lease.clone())
    );
    assert_eq!(
        store.get(keyed.id).await.unwrap().unwrap().state,
        JobState::Available
    );
    assert!(
        store.counts().await.unwrap()[0].paused,
        "pause survives a restart"
    );
    let dup = store.enqueue(job("q").idempotency_key("k")).await.unwrap();
    assert!(
        dup.duplicate && dup.job.id == keyed.id,
        "so do idempotency keys"
    );
    let done = store
        .complete(&lease, json!("after restart"))
        .await
        .unwrap();
    assert_eq!(done.state, JobState::Completed, "and leases");
}

#[tokio::test]
async fn in_memory_and_full_sync_stores_work() {
    let config = StoreConfig::default().clock(ManualClock::new(T0));
    let memory = SqliteStore::in_memory(config.clone()).await.unwrap();
    let j = enqueue(&memory, job("q")).await;
    assert_eq!(memory.get(j.id).await.unwrap().unwrap().id, j.id);
    let (_, lease) = claim_one(&memory, "q", "w").await;
    memory.complete(&lease, json!(1)).await.unwrap();

    let options = SqliteOptions::file(fresh_path("full"))
        .full_sync(true)
        .readers(1);
    let full = SqliteStore::open_with(options, config).await.unwrap();
    let j = enqueue(&full, job("q")).await;
    assert_eq!(
        full.get(j.id).await.unwrap().unwrap().state,
        JobState::Available
    );
}

#[tokio::test]
async fn refused_items_fail_alone() {
    use sqlx::{Connection, SqliteConnection};
    let path = fresh_path("refused");
    let clock = ManualClock::new(T0);
    let store = SqliteStore::open(&path, StoreConfig::default().clock(clock.clone()))
        .await
        .unwrap();
    let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let trigger = format!(
        "CREATE TRIGGER poison BEFORE UPDATE ON jobs \
         WHEN NEW.result = '{}' OR NEW.last_error = 'poison' \
         BEGIN SELECT RAISE(ABORT, 'poison refused'); END",
        suite::leases::POISON_RESULT
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(trigger))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    suite::leases::refused_items_fail_alone(&store, &clock).await;
}
