//! The store suite on a real PostgreSQL server, one fresh schema per test.
//!
//! `SLUICE_TEST_POSTGRES_URL` names the server. Without it these tests
//! fail: a silent skip would pass without testing the shared store.

mod suite;

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_keys::{KeyCache, KeyStore, ManualClock, NewKey, NewTenant};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use suite::store_tests;

fn url() -> String {
    std::env::var("SLUICE_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "SLUICE_TEST_POSTGRES_URL is not set: the PostgreSQL key store tests need a server \
             (postgres://user@127.0.0.1:PORT/db)"
        )
    })
}

/// A new, empty schema.
async fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = format!(
        "keys_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    let ddl = format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}");
    sqlx::raw_sql(AssertSqlSafe(ddl))
        .execute(&mut conn)
        .await
        .expect("create a schema");
    conn.close().await.expect("close");
    schema
}

async fn store_in(schema: &str) -> KeyStore {
    let options = PgConnectOptions::from_str(&url())
        .expect("a postgres:// URL")
        .options([("search_path", schema)]);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .expect("connect");
    KeyStore::from_pool(pool).await.expect("migrate")
}

struct Postgres;

impl suite::Factory for Postgres {
    async fn make(&self, clock: ManualClock) -> KeyStore {
        store_in(&fresh_schema().await).await.with_clock(clock)
    }
}

store_tests!(Postgres);

#[tokio::test]
async fn two_stores_on_one_database_see_each_others_keys() {
    let schema = fresh_schema().await;
    let a = store_in(&schema).await;
    // The second migrates nothing: the schema is there already.
    let b = store_in(&schema).await;
    a.create_tenant(&NewTenant {
        name: "acme".into(),
        ..NewTenant::default()
    })
    .await
    .unwrap();
    let k = a
        .issue_key(&NewKey {
            tenant: "acme".into(),
            ..NewKey::default()
        })
        .await
        .unwrap();
    let caller = KeyCache::new(b.clone()).authenticate(&k.key).await.unwrap();
    assert_eq!(&*caller.tenant, "acme");
    b.revoke_key(&k.record.id).await.unwrap();
    assert!(KeyCache::new(a).authenticate(&k.key).await.is_err());
}
