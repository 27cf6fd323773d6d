//! The store suite on a real PostgreSQL server, one fresh schema per test.
//!
//! `SLUICE_TEST_POSTGRES_URL` names the server; `scripts/test` starts a
//! throwaway one and sets it. Without it these tests fail: a silent skip
//! would pass CI without testing the distributed store at all.

mod suite;

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use sluice_jobs::{JobState, JobStore, ManualClock, PostgresStore, StoreConfig, Tally};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use suite::{Factory, T0, claim_one, enqueue, job};

fn url() -> String {
    std::env::var("SLUICE_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "SLUICE_TEST_POSTGRES_URL is not set: the PostgreSQL job store tests need a server \
             (postgres://user@127.0.0.1:PORT/db). Run scripts/test, which starts one and sets it."
        )
    })
}

/// A new, empty schema.
async fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = format!(
        "jobs_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut conn = PgConnection::connect(&url())
        .await
        .expect("connect to SLUICE_TEST_POSTGRES_URL");
    let ddl = format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}");
    sqlx::raw_sql(AssertSqlSafe(ddl))
        .execute(&mut conn)
        .await
        .expect("create a schema");
    conn.close().await.expect("close");
    schema
}

/// A store whose tables live in `schema`.
async fn store_in(schema: &str, clock: ManualClock) -> PostgresStore {
    let options = PgConnectOptions::from_str(&url())
        .expect("a postgres:// URL")
        .options([("search_path", schema)]);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .expect("connect");
    PostgresStore::from_pool(pool, StoreConfig::default().clock(clock))
        .await
        .expect("migrate")
}

struct Postgres;

impl Factory for Postgres {
    type Store = PostgresStore;

    async fn make(&self, clock: ManualClock) -> PostgresStore {
        store_in(&fresh_schema().await, clock).await
    }

    fn tally(store: &PostgresStore) -> Tally {
        store.tally()
    }
}

suite::store_tests!(Postgres);

/// The suite again on an [`AnyStore`](sluice_jobs::AnyStore) over the
/// same database: the backend chosen at run time (the gateway's) behaves
/// as the store it holds.
mod any_store {
    use super::*;

    suite::store_tests!(suite::Any(Postgres));
}

#[tokio::test]
async fn reconnected_store_keeps_every_job() {
    let schema = fresh_schema().await;
    let clock = ManualClock::new(T0);
    let store = store_in(&schema, clock.clone()).await;
    let j = enqueue(&store, job("q").idempotency_key("k")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    store.close().await;

    let store = store_in(&schema, clock).await;
    assert_eq!(
        store.get(j.id).await.unwrap().unwrap().state,
        JobState::Running
    );
    assert!(
        store
            .enqueue(job("q").idempotency_key("k"))
            .await
            .unwrap()
            .duplicate
    );
    assert_eq!(
        store.complete(&lease, json!(1)).await.unwrap().state,
        JobState::Completed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_database_share_the_queue() {
    // Two pools stand for two gateway processes.
    let schema = fresh_schema().await;
    let clock = ManualClock::new(T0);
    let a = store_in(&schema, clock.clone()).await;
    let b = store_in(&schema, clock).await;
    for _ in 0..20 {
        enqueue(&a, job("q")).await;
    }
    let (from_a, from_b) = tokio::join!(
        a.claim("q", "a", 15, suite::LEASE),
        b.claim("q", "b", 15, suite::LEASE)
    );
    let (from_a, from_b) = (from_a.unwrap(), from_b.unwrap());
    assert_eq!(from_a.len() + from_b.len(), 20);
    assert!(
        from_a.iter().all(|x| from_b.iter().all(|y| x.id != y.id)),
        "no job claimed twice"
    );
}

#[tokio::test]
async fn refused_items_fail_alone() {
    let schema = fresh_schema().await;
    let clock = ManualClock::new(T0);
    let store = store_in(&schema, clock.clone()).await;
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    let ddl = format!(
        "CREATE FUNCTION {schema}.poison() RETURNS trigger AS $$ BEGIN \
           RAISE EXCEPTION 'poison refused'; \
         END $$ LANGUAGE plpgsql; \
         CREATE TRIGGER poison BEFORE UPDATE ON {schema}.jobs FOR EACH ROW \
           WHEN (NEW.result = '{}' OR NEW.last_error = 'poison') \
           EXECUTE FUNCTION {schema}.poison()",
        suite::leases::POISON_RESULT
    );
    sqlx::raw_sql(AssertSqlSafe(ddl))
        .execute(&mut conn)
        .await
        .expect("create the trigger");
    conn.close().await.expect("close");
    suite::leases::refused_items_fail_alone(&store, &clock).await;
}

/// A transaction that took its event's id first but commits last holds
/// back the events committed after it, instead of being passed: a reader
/// going by id alone would have skipped it for good.
#[tokio::test]
async fn an_event_committed_late_is_not_skipped() {
    use sluice_jobs::AnyStore;
    use sluice_jobs::events::EventFilter;
    let schema = fresh_schema().await;
    let store = AnyStore::from(store_in(&schema, ManualClock::new(T0)).await);
    let start = store.events_now().await.unwrap();
    let mut slow = PgConnection::connect(&url()).await.expect("connect");
    let insert = format!(
        "INSERT INTO {schema}.jobs (queue, kind, payload, tenant, grp, run_at, state, created_at, updated_at) \
         VALUES ('q', 'test.noop', '{{}}', 'slow', 'default', 0, 'available', 0, 0)"
    );
    sqlx::raw_sql(AssertSqlSafe(format!("BEGIN; {insert}")))
        .execute(&mut slow)
        .await
        .expect("a job in an open transaction");
    let fast = enqueue(&store, job("q").tenant("fast")).await;
    let read = |cursor| {
        let store = store.clone();
        async move {
            store
                .events(cursor, &EventFilter::default(), 100)
                .await
                .unwrap()
        }
    };
    let held = read(start).await;
    assert!(held.events.is_empty(), "held back: {:?}", held.events);
    assert_eq!(held.cursor, start);
    sqlx::raw_sql(AssertSqlSafe("COMMIT".to_owned()))
        .execute(&mut slow)
        .await
        .expect("commit");
    // Other tests' transactions on the server may hold the events back a
    // little longer: a bounded wait for them.
    let mut page = read(start).await;
    for _ in 0..1_000 {
        if page.events.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        page = read(start).await;
    }
    let tenants: Vec<&str> = page.events.iter().map(|e| e.tenant.as_str()).collect();
    assert_eq!(
        tenants,
        ["slow", "fast"],
        "in commit order, neither skipped"
    );
    assert_eq!(page.events[1].job, fast.id);
    assert!(read(page.cursor).await.events.is_empty());
}
