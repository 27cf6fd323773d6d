//! Schemas applied to a real (in-memory) SQLite database.

use sluice_store::{Schema, Step};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

async fn db() -> SqlitePool {
    // One connection holds the whole in-memory database.
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(SqliteConnectOptions::new().in_memory(true))
        .await
        .unwrap()
}

async fn versions(pool: &SqlitePool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

const A1: Step = Step::new(1, "a", "CREATE TABLE a (id INTEGER PRIMARY KEY)");
const A2: Step = Step::new(2, "a.name", "ALTER TABLE a ADD COLUMN name TEXT");
const B1: Step = Step::new(1, "b", "CREATE TABLE b (id INTEGER PRIMARY KEY)");

#[tokio::test]
async fn two_schemas_share_a_database_with_separate_histories() {
    let pool = db().await;
    Schema::new(&[A1, A2])
        .table("_a_migrations")
        .migrator()
        .run(&pool)
        .await
        .unwrap();
    // Version 1 again, but another schema's: applied, not skipped.
    Schema::new(&[B1])
        .table("_b_migrations")
        .migrator()
        .run(&pool)
        .await
        .unwrap();
    assert_eq!(versions(&pool, "_a_migrations").await, [1, 2]);
    assert_eq!(versions(&pool, "_b_migrations").await, [1]);
    sqlx::query("INSERT INTO a (name) VALUES ('x')")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO b DEFAULT VALUES")
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn without_a_table_name_the_history_is_sqlx_default() {
    let pool = db().await;
    Schema::new(&[A1]).migrator().run(&pool).await.unwrap();
    assert_eq!(versions(&pool, "_sqlx_migrations").await, [1]);
}

#[tokio::test]
async fn a_later_release_applies_only_its_new_steps() {
    let pool = db().await;
    let table = "_a_migrations";
    Schema::new(&[A1])
        .table(table)
        .migrator()
        .run(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO a DEFAULT VALUES")
        .execute(&pool)
        .await
        .unwrap();
    // Running step 1 again would fail (the table exists) or lose the row.
    Schema::new(&[A1, A2])
        .table(table)
        .migrator()
        .run(&pool)
        .await
        .unwrap();
    assert_eq!(versions(&pool, table).await, [1, 2]);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM a WHERE name IS NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn an_edited_released_step_is_refused() {
    let pool = db().await;
    Schema::new(&[A1]).migrator().run(&pool).await.unwrap();
    const EDITED: Step = Step::new(
        1,
        "a",
        "CREATE TABLE a (id INTEGER PRIMARY KEY, extra TEXT)",
    );
    let err = Schema::new(&[EDITED])
        .migrator()
        .run(&pool)
        .await
        .unwrap_err();
    assert!(
        matches!(err, sqlx::migrate::MigrateError::VersionMismatch(1)),
        "{err}"
    );
}

#[test]
#[should_panic(expected = "strictly increase")]
fn versions_out_of_order_are_refused() {
    let _ = Schema::new(&[A2, A1]);
}
