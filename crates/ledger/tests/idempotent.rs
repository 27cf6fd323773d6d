//! One record per key (issue 34): a batch written again (a spill file
//! replayed twice, a batch spilled while its write went through after
//! all) is stored once and adds to the rollups once, on SQLite (a file
//! through the direct writer, in memory through sqlx) and PostgreSQL
//! (`SLUICE_TEST_POSTGRES_URL`); and a database of the version before,
//! duplicates included, migrates.

use sluice_ledger::{Granularity, LedgerStore, Query, Record};
use sluice_store::{PoolOptions, Schema, Step};

#[path = "../../store/tests/shared/stores.rs"]
mod stores;

use stores::{TempDir, postgres_url, unique};

/// `n` records of `tenant`, each under a key of its own, `n` driving
/// their figures.
fn records(tenant: &str, n: u64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let mut r = Record::new(
                format!("req-{i}"),
                tenant,
                "model",
                "openai",
                "openai/gpt-4o-mini",
                "/v1/chat/completions",
            );
            r.status = 200;
            r.prompt_tokens = 100 + i;
            r.completion_tokens = 10 + i;
            r.cost_nanos = 1_000 * (i + 1);
            r
        })
        .collect()
}

/// Records, tokens and cost of `tenant`: from the raw records, and from
/// the day rollups.
async fn counted(store: &LedgerStore, tenant: &str) -> ((u64, u64, u64), (u64, u64, u64)) {
    let t = store.totals(0, i64::MAX, Some(tenant)).await.unwrap();
    let mut q = Query::new(0, i64::MAX, Granularity::Day);
    q.tenant = Some(tenant.to_owned());
    let rows = store.usage(&q).await.unwrap();
    let r = rows.iter().fold((0, 0, 0), |a, r| {
        (
            a.0 + r.requests,
            a.1 + r.prompt_tokens + r.completion_tokens,
            a.2 + r.cost_nanos,
        )
    });
    (
        (
            t.records,
            t.prompt_tokens + t.completion_tokens,
            t.cost_nanos,
        ),
        r,
    )
}

async fn a_batch_written_again_counts_once(store: &LedgerStore) {
    let t = unique("again");
    let all = records(&t, 300);
    let want = (
        300,
        all.iter()
            .map(|r| r.prompt_tokens + r.completion_tokens)
            .sum::<u64>(),
        all.iter().map(|r| r.cost_nanos).sum::<u64>(),
    );
    // The first 200, then all 300 (the first 200 again, as a replay
    // that a crash cut and that started over would), then 50 of them
    // once more with one key twice in the same batch.
    assert_eq!(store.insert(&all[..200]).await.unwrap(), 200);
    assert_eq!(store.insert(&all).await.unwrap(), 100, "only the new ones");
    let mut again: Vec<Record> = all[100..150].to_vec();
    again.push(all[120].clone());
    assert_eq!(store.insert(&again).await.unwrap(), 0);
    assert_eq!(counted(store, &t).await, (want, want));
    // A key twice in a batch of new records is stored once.
    let t2 = unique("twice");
    let mut fresh = records(&t2, 20);
    fresh.push(fresh[3].clone());
    assert_eq!(store.insert(&fresh).await.unwrap(), 20);
    assert_eq!(counted(store, &t2).await.0.0, 20);
    // Records of the same request id are different calls (a client
    // that sends its id again when it retries): each is kept.
    let t3 = unique("same-id");
    let mut same = records(&t3, 2);
    let first = same[0].request_id.clone();
    same[1].request_id = first;
    assert_eq!(store.insert(&same).await.unwrap(), 2);
}

#[tokio::test]
async fn sqlite_file_a_batch_written_again_counts_once() {
    let dir = TempDir::new("ledger-again");
    let store = LedgerStore::open(dir.0.join("ledger.db")).await.unwrap();
    a_batch_written_again_counts_once(&store).await;
}

#[tokio::test]
async fn sqlite_a_batch_written_again_counts_once() {
    a_batch_written_again_counts_once(&LedgerStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_a_batch_written_again_counts_once() {
    if let Some(url) = postgres_url("ledger") {
        let store = LedgerStore::connect(&url).await.unwrap();
        a_batch_written_again_counts_once(&store).await;
    }
}

/// The schema before record keys, as `sluice-ledger` released it.
const BEFORE: Schema = Schema::new(&[Step::new(
    1,
    "usage ledger",
    include_str!("../migrations/sqlite/0001_ledger.sql"),
)])
.table("_sluice_ledger_migrations");

#[tokio::test]
async fn a_database_with_duplicates_migrates_and_keeps_them() {
    let dir = TempDir::new("ledger-migrate");
    let path = dir.0.join("ledger.db");
    let pool = BEFORE
        .open_sqlite(&path, PoolOptions::new(2))
        .await
        .unwrap();
    // The same record three times, as a replay cut twice left it.
    for _ in 0..3 {
        sqlx::query(
            "INSERT INTO usage_records (at_ms, request_id, tenant, kind, provider, model, \
             endpoint, status, prompt_tokens, completion_tokens, cached_tokens, \
             reasoning_tokens, estimated, cost_nanos, latency_ms, queue_ms, retries, cache_hit) \
             VALUES (1000, 'req-old', 'old', 'model', 'openai', 'm', '/v1/chat/completions', \
             200, 10, 1, 0, 0, 0, 5, 3, 0, 0, 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;
    let store = LedgerStore::open(&path).await.expect("the migration runs");
    let old = store.records("old", 0, 100).await.unwrap();
    assert_eq!(old.len(), 3, "rows stored before are kept as they are");
    let keys: std::collections::HashSet<_> = old.iter().map(|(_, r)| r.uid.clone()).collect();
    assert_eq!(keys.len(), 3, "each under a key of its own: {keys:?}");
    // New records are keyed from now on.
    let t = unique("after");
    let new = records(&t, 5);
    assert_eq!(store.insert(&new).await.unwrap(), 5);
    assert_eq!(store.insert(&new).await.unwrap(), 0);
    store.close().await;
}

/// A record spilled by a version without keys (no `uid` in its JSON
/// line) is keyed by what it holds: read twice, stored once.
#[tokio::test]
async fn a_spilled_record_without_a_key_is_stored_once() {
    let mut r = records("keyless", 1).remove(0);
    let mut line = serde_json::to_value(&r).unwrap();
    line.as_object_mut().unwrap().remove("uid");
    let read: Record = serde_json::from_value(line).unwrap();
    assert!(read.uid.is_empty());
    r.uid.clear();
    assert_eq!(read, r);
    let store = LedgerStore::in_memory().await.unwrap();
    assert_eq!(store.insert(std::slice::from_ref(&read)).await.unwrap(), 1);
    assert_eq!(store.insert(&[read]).await.unwrap(), 0);
}
