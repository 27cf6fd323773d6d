//! The SQLite backend: one file in WAL mode, one writer, several readers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{SqlSafeStr, Sqlite, Transaction};

use crate::backend::Backend;
use crate::config::StoreConfig;
use crate::error::Error;
use crate::migrate;
use crate::sql::{self, Dialect};
use crate::sql_store::Store;

crate::conn::impl_conn!(SqliteConnection, SqliteRow);

/// A job store in a SQLite database.
///
/// Writes go through one connection, each in an `IMMEDIATE` transaction,
/// so that writers queue in the pool instead of failing with "database is
/// locked"; reads use their own connections and, thanks to WAL, never wait
/// for the writer.
pub type SqliteStore = Store<SqliteBackend>;

/// The pools of a [`SqliteStore`].
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    write: SqlitePool,
    read: SqlitePool,
    /// `synchronous = FULL` for every commit but a claim's.
    full_sync: bool,
    /// The writer may be at `synchronous = NORMAL` (a claim relaxed it).
    /// Read and written only while holding the one write connection.
    relaxed: Arc<AtomicBool>,
}

/// Where and how to open a [`SqliteStore`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    path: Option<PathBuf>,
    full_sync: bool,
    readers: u32,
}

impl SqliteOptions {
    /// The database file at `path`, created if missing.
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self {
            path: Some(path.as_ref().to_owned()),
            full_sync: false,
            readers: 4,
        }
    }

    /// A private in-memory database, gone when the store is dropped.
    pub fn in_memory() -> Self {
        Self {
            path: None,
            full_sync: false,
            readers: 0,
        }
    }

    /// Makes every commit wait until it is on disk (`synchronous = FULL`):
    /// an enqueue, completion or failure that was answered survives a power
    /// loss. Claims are the exception (`NORMAL`): a claim lost to a power
    /// loss leaves its job available to run again, as a rescue would after
    /// the crash anyway (without using an attempt), and the next fsynced
    /// commit writes it out with the rest of the log. Off by default: in
    /// WAL mode with `synchronous = NORMAL` a commit survives the process
    /// being killed, and only a power loss or an OS crash may lose the
    /// last few.
    #[must_use]
    pub fn full_sync(mut self, on: bool) -> Self {
        self.full_sync = on;
        self
    }

    /// How many connections serve reads (at least 1; 4 by default).
    #[must_use]
    pub fn readers(mut self, n: u32) -> Self {
        self.readers = n.max(1);
        self
    }
}

impl Store<SqliteBackend> {
    /// Opens (creating if needed) the database file at `path` and brings its
    /// schema up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the file cannot be opened, [`Error::Migrate`]
    /// if the schema cannot be migrated.
    pub async fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self, Error> {
        Self::open_with(SqliteOptions::file(path), config).await
    }

    /// A store in a private in-memory database.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn in_memory(config: StoreConfig) -> Result<Self, Error> {
        Self::open_with(SqliteOptions::in_memory(), config).await
    }

    /// Opens a store as `options` say.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(options: SqliteOptions, config: StoreConfig) -> Result<Self, Error> {
        let sync = if options.full_sync {
            SqliteSynchronous::Full
        } else {
            SqliteSynchronous::Normal
        };
        let connect = SqliteConnectOptions::new()
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // A claim or a batch of completions returns up to 1000 rows:
            // buffered whole, the connection's thread streams them without
            // waiting for the caller to take each (50 by default).
            .row_buffer_size(ROW_BUFFER)
            // A flow nested in a flow passes a child's end up through the
            // same trigger (migration 8).
            .pragma("recursive_triggers", "ON")
            .synchronous(sync);
        let backend = match &options.path {
            Some(path) => {
                let connect = connect.filename(path).journal_mode(SqliteJournalMode::Wal);
                let write = pool(1).connect_with(connect.clone()).await?;
                migrate::SQLITE.migrator().run(&write).await?;
                let read = pool(options.readers).connect_with(connect).await?;
                SqliteBackend {
                    write,
                    read,
                    full_sync: options.full_sync,
                    relaxed: Arc::default(),
                }
            }
            None => {
                // One connection holds the whole database: it must never be
                // closed for idling, and reads share it.
                let memory = connect.in_memory(true);
                let write = pool(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .connect_with(memory)
                    .await?;
                migrate::SQLITE.migrator().run(&write).await?;
                SqliteBackend {
                    read: write.clone(),
                    write,
                    full_sync: options.full_sync,
                    relaxed: Arc::default(),
                }
            }
        };
        Ok(Store::new(backend, config))
    }
}

impl SqliteBackend {
    /// Starts a writing transaction whose commit is fsynced (`full`) or
    /// not. With `full_sync` off every commit is `NORMAL` and this is a
    /// plain `BEGIN IMMEDIATE`; with it on, the connection's level is
    /// switched only when it changes (SQLite refuses to switch it inside a
    /// transaction).
    async fn begin_at(&self, full: bool) -> Result<Transaction<'static, Sqlite>, Error> {
        let mut conn = self.write.acquire().await?;
        settle_transactions(&mut conn).await?;
        // IMMEDIATE takes the write lock at once: a transaction that reads
        // before it writes (every claim does) cannot be refused the upgrade
        // by another process writing meanwhile. A change of level goes in
        // the same call, before it: each call is a hand-off to the
        // connection's thread and back, and a burn-down switches levels
        // at every transaction (a claim, then a batch of completions).
        let begin = match (self.full_sync, full) {
            (false, _) => "BEGIN IMMEDIATE",
            (true, true) if self.relaxed.load(Ordering::SeqCst) => {
                "PRAGMA synchronous = FULL; BEGIN IMMEDIATE"
            }
            (true, true) => "BEGIN IMMEDIATE",
            (true, false) if self.relaxed.load(Ordering::SeqCst) => "BEGIN IMMEDIATE",
            (true, false) => {
                // Marked first: a failure leaves it at FULL, which is safe.
                self.relaxed.store(true, Ordering::SeqCst);
                "PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE"
            }
        };
        let tx = Transaction::begin(conn, Some(begin.into_sql_str())).await?;
        if self.full_sync && full {
            // Only now known to be at FULL (a failed switch is tried again).
            self.relaxed.store(false, Ordering::SeqCst);
        }
        Ok(tx)
    }
}

/// Brings sqlx's count of open transactions on `conn` back to SQLite's.
///
/// On a full disk (or an I/O error) SQLite rolls a transaction back by
/// itself; sqlx's own ROLLBACK then fails ("no transaction is active"), so
/// its count stays above zero and every later `BEGIN` on the connection is
/// refused ("begin_with at non-zero transaction depth"). Measured: the job
/// store stayed unusable after the space came back, until a restart. Here
/// the count is repaired instead: a rollback that a dropped transaction
/// queued runs first (the ping waits behind it); if the count is still
/// above zero, each level is reopened in SQLite and rolled back through
/// sqlx, which counts it down.
async fn settle_transactions(conn: &mut SqliteConnection) -> Result<(), Error> {
    use sqlx::Connection;
    use sqlx::sqlite::SqliteTransactionManager as Manager;
    use sqlx_core::transaction::TransactionManager;
    if !conn.is_in_transaction() {
        return Ok(());
    }
    conn.ping().await?;
    while conn.is_in_transaction() {
        tracing::warn!("jobs: repairing a connection whose transaction SQLite ended by itself");
        // Refused if SQLite is in fact inside one: the rollback ends that.
        let _ = sqlx::raw_sql("BEGIN").execute(&mut *conn).await;
        Manager::rollback(conn).await?;
    }
    Ok(())
}

/// Rows a connection's thread may send ahead of the caller: one claim's
/// worth ([`MAX_CLAIM`](crate::MAX_CLAIM)).
const ROW_BUFFER: usize = 1_000;

fn pool(max: u32) -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(max)
        // No ping before each use: it is a hand-off to the connection's
        // thread and back for every transaction, and it tells nothing
        // about a file on this machine that the statement itself would
        // not (a dead connection fails its statement the same way).
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(30))
}

impl Backend for SqliteBackend {
    type Tx = Transaction<'static, Sqlite>;
    type Read = sqlx::pool::PoolConnection<Sqlite>;

    fn dialect(&self) -> &'static Dialect {
        &sql::SQLITE
    }

    async fn begin(&self) -> Result<Self::Tx, Error> {
        self.begin_at(self.full_sync).await
    }

    async fn begin_claim(&self) -> Result<Self::Tx, Error> {
        self.begin_at(false).await
    }

    async fn commit(tx: Self::Tx) -> Result<(), Error> {
        Ok(tx.commit().await?)
    }

    async fn read(&self) -> Result<Self::Read, Error> {
        Ok(self.read.acquire().await?)
    }

    async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }
}

#[cfg(test)]
mod tests;
