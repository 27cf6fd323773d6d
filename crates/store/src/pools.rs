//! The pools the stores open: a SQLite file in WAL mode, a private
//! in-memory SQLite database, or PostgreSQL, each with the store's schema
//! brought up to date.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::Schema;

/// A store's pool on either engine.
#[derive(Debug, Clone)]
pub enum Pool {
    /// A SQLite file or in-memory database.
    Sqlite(SqlitePool),
    /// A PostgreSQL database.
    Postgres(PgPool),
}

impl Pool {
    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

/// How a store's pool is sized and its SQLite connections set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    connections: u32,
    foreign_keys: bool,
}

impl PoolOptions {
    /// Up to `connections` connections (a SQLite file's or PostgreSQL's;
    /// an in-memory database is one connection), foreign keys unchecked.
    pub const fn new(connections: u32) -> PoolOptions {
        PoolOptions {
            connections,
            foreign_keys: false,
        }
    }

    /// With SQLite checking foreign keys (`PRAGMA foreign_keys`), which
    /// it does not by default; PostgreSQL always does.
    #[must_use]
    pub const fn foreign_keys(mut self, on: bool) -> PoolOptions {
        self.foreign_keys = on;
        self
    }
}

/// Longest wait for a pooled PostgreSQL connection, connecting included.
/// While the server is down every call fails after it (a 503 at the
/// gateway) instead of waiting for the server's return: measured, a 3.5 s
/// outage held each job enqueue 5.2 s and then stored it, with sqlx's 30 s
/// default. A healthy server answers in milliseconds, so a wait this long
/// means it is down or overloaded either way.
pub const PG_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

impl Schema {
    /// Opens (creating if needed) the SQLite file at `path` in WAL mode,
    /// waiting up to 10 s for another writer, and brings it up to this
    /// schema.
    ///
    /// # Errors
    /// The file cannot be opened, or the schema cannot be migrated
    /// (`sqlx::Error::Migrate`).
    pub async fn open_sqlite(
        &self,
        path: impl AsRef<Path>,
        options: PoolOptions,
    ) -> Result<SqlitePool, sqlx::Error> {
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .foreign_keys(options.foreign_keys)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        // No ping before each use: a connection is a file handle in this
        // process, which a ping cannot find broken, and each ping is a
        // round trip to the connection's thread (two context switches per
        // transaction, most of a transaction's cost at a low rate).
        let pool = SqlitePoolOptions::new()
            .max_connections(options.connections)
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
    pub async fn sqlite_in_memory(&self, options: PoolOptions) -> Result<SqlitePool, sqlx::Error> {
        let connect = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(options.foreign_keys);
        // One connection holds the whole database: never closed for idling.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(connect)
            .await?;
        self.migrator().run(&pool).await?;
        Ok(pool)
    }

    /// Connects to PostgreSQL at `url` (2 s at most to get a connection)
    /// and brings it up to this schema.
    ///
    /// # Errors
    /// A bad URL, an unreachable server, or a schema that cannot be
    /// migrated (`sqlx::Error::Migrate`).
    pub async fn connect_postgres(
        &self,
        url: &str,
        options: PoolOptions,
    ) -> Result<PgPool, sqlx::Error> {
        let connect = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(options.connections)
            .acquire_timeout(PG_ACQUIRE_TIMEOUT)
            .connect_with(connect)
            .await?;
        self.migrator().run(&pool).await?;
        Ok(pool)
    }
}
