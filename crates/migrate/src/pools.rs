//! The pools the small stores open (the audit trail, the usage ledger):
//! a SQLite file in WAL mode, a private in-memory SQLite database, or
//! PostgreSQL, each with the store's schema brought up to date.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::Schema;

impl Schema {
    /// Opens (creating if needed) the SQLite file at `path` in WAL mode,
    /// waiting up to 10 s for another writer, with a pool of up to 2
    /// connections, and brings it up to this schema.
    ///
    /// # Errors
    /// The file cannot be opened, or the schema cannot be migrated
    /// (`sqlx::Error::Migrate`).
    pub async fn open_sqlite(&self, path: impl AsRef<Path>) -> Result<SqlitePool, sqlx::Error> {
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        // No ping before each use: a connection is a file handle in this
        // process, which a ping cannot find broken, and each ping is a
        // round trip to the connection's thread (two context switches per
        // transaction, most of a transaction's cost at a low rate).
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .test_before_acquire(false)
            .connect_with(connect)
            .await?;
        self.migrator().run(&pool).await?;
        Ok(pool)
    }

    /// A private in-memory SQLite database at this schema.
    ///
    /// # Errors
    /// As [`Schema::open_sqlite`].
    pub async fn sqlite_in_memory(&self) -> Result<SqlitePool, sqlx::Error> {
        // One connection holds the whole database: never closed for idling.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(SqliteConnectOptions::new().in_memory(true))
            .await?;
        self.migrator().run(&pool).await?;
        Ok(pool)
    }

    /// Connects to PostgreSQL at `url` (a pool of up to 2 connections,
    /// 2 s to get one) and brings it up to this schema.
    ///
    /// # Errors
    /// A bad URL, an unreachable server, or a schema that cannot be
    /// migrated (`sqlx::Error::Migrate`).
    pub async fn connect_postgres(&self, url: &str) -> Result<PgPool, sqlx::Error> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(2))
            .connect_with(options)
            .await?;
        self.migrator().run(&pool).await?;
        Ok(pool)
    }
}
