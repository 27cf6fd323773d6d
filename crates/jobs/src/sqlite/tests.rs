//! What a claim reads on SQLite, with a year of scheduled jobs in the way.

use std::time::Duration;

use serde_json::json;
use sqlx::AssertSqlSafe;

use super::*;
use crate::{JobStore, ManualClock, NewJob, Timestamp};

const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);
const LATER: Timestamp = Timestamp::from_millis(T0.as_millis() + 365 * 86_400_000);
const FUTURE: i64 = 300_000;

/// 300k jobs due in a year, each in a group of its own (what 300 batches
/// of 1,000 would store), and 20 due jobs of another tenant in 2 groups.
async fn flooded(clock: &ManualClock) -> SqliteStore {
    let store = SqliteStore::in_memory(StoreConfig::default().clock(clock.clone()))
        .await
        .unwrap();
    let later = LATER.as_millis();
    // Stored as an enqueue stores a scheduled job (not due), in one
    // statement: 300k enqueues would take minutes in a debug build.
    let insert = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {FUTURE}) \
         INSERT INTO jobs (queue, kind, payload, tenant, grp, run_at, state, created_at, \
                           updated_at, due) \
         SELECT 'q', 'noop', '{{}}', 'flood', 'g' || i, {later}, 'scheduled', {t0}, {t0}, FALSE \
         FROM n",
        t0 = T0.as_millis()
    );
    sqlx::query(AssertSqlSafe(insert))
        .execute(&store.backend.write)
        .await
        .unwrap();
    for i in 0..20 {
        let job = NewJob::new("q", "noop", json!({}))
            .tenant("acme")
            .group(format!("a{}", i % 2));
        store.enqueue(job).await.unwrap();
    }
    store
}

/// One test, one flood: building it is most of the time.
#[tokio::test]
async fn a_claim_reads_only_due_jobs() {
    let clock = ManualClock::new(T0);
    let store = flooded(&clock).await;
    claim_statements_search_their_indexes(&store).await;
    let walked: i64 = sqlx::query_scalar(sql::SQLITE_WALKED)
        .bind("q")
        .bind(T0.as_millis())
        .bind(8_i64)
        .fetch_one(&store.backend.write)
        .await
        .unwrap();
    assert_eq!(
        walked, 2,
        "acme's two groups, none of the 300k scheduled ones"
    );

    let mut claimed = 0;
    loop {
        let jobs = store
            .claim("q", "w", 8, Duration::from_secs(30))
            .await
            .unwrap();
        if jobs.is_empty() {
            break;
        }
        assert!(jobs.iter().all(|j| j.tenant == "acme"), "{jobs:?}");
        claimed += jobs.len();
    }
    assert_eq!(claimed, 20, "every due job, in three claims");

    // A year later all 300k come due at once: one claim marks the earliest
    // MAX_PROMOTE due and takes from them; the rest wait for the next claims.
    clock.set(LATER);
    let jobs = store
        .claim("q", "w", 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 10);
    let marked: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE due AND state = 'scheduled'")
            .fetch_one(&store.backend.write)
            .await
            .unwrap();
    assert_eq!(marked, crate::ops::claim::MAX_PROMOTE - 10);
}

/// The plans of the promotion and the pick: each reads through its index,
/// neither scans the table.
async fn claim_statements_search_their_indexes(store: &SqliteStore) {
    let plan = |sql: &'static str| {
        let store = store.clone();
        async move {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(AssertSqlSafe(explain))
                .bind("q")
                .bind(T0.as_millis())
                .bind(10_i64)
                .fetch_all(&store.backend.write)
                .await
                .unwrap();
            rows.into_iter().map(|r| r.3).collect::<Vec<String>>()
        }
    };
    for (name, sql, index) in [
        ("promote", sql::SQLITE.promote, "jobs_waiting"),
        ("claim", sql::SQLITE.claim, "jobs_ready"),
    ] {
        let steps = plan(sql).await;
        assert!(
            steps.iter().any(|s| s.contains(index)),
            "{name} uses {index}: {steps:#?}"
        );
        assert!(
            !steps.iter().any(|s| s.starts_with("SCAN jobs")),
            "{name} never reads the whole table: {steps:#?}"
        );
    }
}

/// A tenant's list seeks its own entries of `jobs_tenant` whatever the
/// filters, rather than walk every tenant's rows from the cursor on.
#[tokio::test]
async fn a_tenants_list_searches_its_index() {
    let store = SqliteStore::in_memory(StoreConfig::default())
        .await
        .unwrap();
    for (queue, state) in [
        (None, None),
        (Some("q"), None),
        (None, Some("dead")),
        (Some("q"), Some("dead")),
    ] {
        let explain = format!("EXPLAIN QUERY PLAN {}", sql::LIST_TENANT);
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(AssertSqlSafe(explain))
            .bind(queue)
            .bind(state)
            .bind(0_i64)
            .bind(10_i64)
            .bind("acme")
            .fetch_all(&store.backend.write)
            .await
            .unwrap();
        let steps: Vec<&str> = rows.iter().map(|r| r.3.as_str()).collect();
        assert_eq!(
            steps,
            ["SEARCH jobs USING INDEX jobs_tenant (tenant=? AND id>?)"],
            "queue {queue:?}, state {state:?}"
        );
    }
}

/// The statements over a queue's or a state's jobs that no index holds by
/// state (migration 11): the counts, retention, the dead jobs' purge and
/// retry each read through the index of the states they want, never the
/// whole table, and the counts and retention read no row but those they
/// delete (the running jobs, a pool's leases, may be read).
#[tokio::test]
async fn counts_and_cleanup_read_the_indexes_of_their_states() {
    let store = SqliteStore::in_memory(StoreConfig::default())
        .await
        .unwrap();
    for (name, sql, params) in [
        ("counts", sql::COUNTS, 0),
        ("expire", sql::EXPIRE_JOBS, 3),
        ("purge", sql::PURGE_DEAD, 1),
        ("retry dead", sql::RETRY_DEAD, 2),
    ] {
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let mut query = sqlx::query_as(AssertSqlSafe(explain));
        for i in 0..params {
            query = match i {
                0 if name != "expire" => query.bind("q"),
                0 => query.bind("completed"),
                _ => query.bind(T0.as_millis()),
            };
        }
        let rows: Vec<(i64, i64, i64, String)> =
            query.fetch_all(&store.backend.write).await.unwrap();
        let on_jobs: Vec<&str> = rows
            .iter()
            .map(|r| r.3.as_str())
            .filter(|s| s.starts_with("SCAN jobs") || s.starts_with("SEARCH j"))
            .collect();
        let steps: Vec<&str> = rows.iter().map(|r| r.3.as_str()).collect();
        assert!(
            !on_jobs.is_empty()
                && on_jobs
                    .iter()
                    .all(|s| s.contains(" INDEX jobs_") || s.ends_with("PRIMARY KEY (rowid=?)")),
            "{name} reads jobs only through an index (or by id): {steps:#?}"
        );
        if matches!(name, "counts" | "expire") {
            assert!(
                on_jobs
                    .iter()
                    .filter(|s| s.contains(" INDEX jobs_") && !s.contains("jobs_running"))
                    .all(|s| s.contains("COVERING INDEX")),
                "{name} reads no row of the jobs it counts or picks: {steps:#?}"
            );
        }
    }
}

/// A database made before migration 11 (counts through `jobs_queue_state`,
/// every event listed by job) opens with its jobs counted as before and
/// each job's timeline whole: migration 12 takes each run's start from
/// the `active` events already written, for the events that ended a run
/// and for the jobs running or completed.
#[tokio::test]
async fn an_older_database_keeps_its_counts_and_timelines() {
    let dir = std::env::temp_dir().join(format!(
        "sluice-jobs-upgrade-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.db");
    {
        let connect = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .pragma("recursive_triggers", "ON");
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(connect)
            .await
            .unwrap();
        sluice_store::Schema::new(&crate::migrate::SQLITE_STEPS[..10])
            .migrator()
            .run(&pool)
            .await
            .unwrap();
        sqlx::raw_sql(crate::migrate::older::HISTORY)
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    let store = SqliteStore::open(&path, StoreConfig::default())
        .await
        .unwrap();
    crate::migrate::older::check(&store).await;
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full disk makes SQLite roll a transaction back by itself; sqlx's own
/// rollback then fails and it goes on counting the transaction as open,
/// which refused every later `BEGIN` on the connection until a restart.
/// Simulated exactly: the transaction is ended behind sqlx's back.
#[tokio::test]
async fn a_transaction_sqlite_ended_by_itself_leaves_the_store_usable() {
    let dir = std::env::temp_dir().join(format!(
        "sluice-jobs-settle-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = SqliteStore::open(&dir.join("jobs.db"), StoreConfig::default())
        .await
        .unwrap();
    for _ in 0..3 {
        let mut tx = store.backend.begin().await.unwrap();
        sqlx::query("ROLLBACK").execute(&mut *tx).await.unwrap();
        // Dropped: sqlx's ROLLBACK fails, its count stays at one.
        drop(tx);
        store
            .enqueue(NewJob::new("q", "noop", json!({})))
            .await
            .expect("the next transaction begins");
    }
    let counts = store.counts().await.unwrap();
    let q = counts.iter().find(|c| c.queue == "q").expect("queue q");
    assert_eq!(q.counts.available, 3, "{counts:?}");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bundled SQLite is built as the workspace's `.cargo/config.toml`
/// says (`LIBSQLITE3_FLAGS`): without memory statistics, whose global
/// mutex every `sqlite3_malloc` and `sqlite3_free` took, and without
/// `SQLITE_ENABLE_MEMORY_MANAGEMENT`, which puts every connection's page
/// cache in one LRU under one mutex (docs/jobs.md, the burn-down's CPU);
/// and with the query planner's stability guarantee, without which every
/// statement with a bound `LIMIT` (each claim) is prepared again each time
/// it runs.
#[tokio::test]
async fn sqlite_is_built_without_its_global_allocation_mutexes() {
    let store = SqliteStore::in_memory(StoreConfig::default())
        .await
        .unwrap();
    let options: Vec<String> = sqlx::query_scalar("PRAGMA compile_options")
        .fetch_all(&store.backend.write)
        .await
        .unwrap();
    assert!(
        options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
        "{options:?}"
    );
    assert!(
        !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
        "{options:?}"
    );
    assert!(options.iter().any(|o| o == "ENABLE_QPSG"), "{options:?}");
}

/// Rows are read by column positions found by name once a result: a
/// result whose columns come in another order (and with others among
/// them) reads the same jobs, each row its own.
#[tokio::test]
async fn jobs_are_read_by_column_name_whatever_the_order() {
    use crate::backend::Conn;
    let clock = ManualClock::new(T0);
    let store = SqliteStore::in_memory(StoreConfig::default().clock(clock.clone()))
        .await
        .unwrap();
    for i in 0..3 {
        let job = NewJob::new("q", "noop", json!({"n": i}))
            .tenant(format!("t{i}"))
            .group("g")
            .priority(i);
        store.enqueue(job).await.unwrap();
    }
    // Leased, so that the lease's columns are not NULL.
    let mut claimed = store
        .claim("q", "w", 3, Duration::from_secs(30))
        .await
        .unwrap();
    claimed.sort_by_key(|j| j.id);
    assert_eq!(claimed.len(), 3);
    assert!(claimed.iter().all(|j| j.lease.is_some()));
    let mut c = store.backend.write.acquire().await.unwrap();
    let reversed = "SELECT 7 AS other, on_child_failure, pending_children, parent_id, \
         schedule_tick, schedule, progress, traceparent, result, finished_at, updated_at, \
         created_at, lease_expires_at, lease_token, lease_owner, last_error, state, run_at, \
         reschedules, max_attempts, attempts, idempotency_key, priority, grp, tenant, \
         payload, kind, queue, id FROM jobs ORDER BY id";
    let read = c.jobs(reversed, Vec::new()).await.unwrap();
    assert_eq!(read, claimed);
    let summaries = c.summaries(reversed, Vec::new()).await.unwrap();
    assert_eq!(
        summaries
            .iter()
            .map(|s| (s.id, s.tenant.clone(), s.priority))
            .collect::<Vec<_>>(),
        claimed
            .iter()
            .map(|j| (j.id, j.tenant.clone(), j.priority))
            .collect::<Vec<_>>()
    );
    assert!(
        c.jobs("SELECT * FROM jobs WHERE id < 0", Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
}
