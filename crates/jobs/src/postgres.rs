//! The PostgreSQL backend, for several gateways sharing one queue.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, SqlSafeStr, Transaction};

use crate::backend::Backend;
use crate::config::StoreConfig;
use crate::error::Error;
use crate::migrate;
use crate::sql::{self, Dialect};
use crate::sql_store::Store;

crate::conn::impl_conn!(PgConnection, PgRow);

/// A job store in a PostgreSQL database, safe to share between processes:
/// claims lock the rows they take and skip the rows others took
/// (`FOR UPDATE SKIP LOCKED`), so claimers never wait on each other.
///
/// Every process must read the same time within a small fraction of the
/// lease: leases are decided by the clocks of the processes.
pub type PostgresStore = Store<PostgresBackend>;

/// The pool of a [`PostgresStore`].
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    pool: PgPool,
}

impl Store<PostgresBackend> {
    /// Connects to `url` (`postgres://user:password@host:port/database`)
    /// with a pool of up to 10 connections, and brings the schema up to date.
    /// A call waits at most 2 s for a connection (connecting included).
    ///
    /// # Errors
    /// [`Error::Database`] if the URL is bad or the server unreachable,
    /// [`Error::Migrate`] if the schema cannot be migrated.
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Self, Error> {
        let options = without_jit(PgConnectOptions::from_str(url)?);
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(sluice_store::PG_ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        Self::from_pool(pool, config).await
    }

    /// A store on an existing pool (to set its size, schema or TLS), whose
    /// schema it brings up to date. Build its options with
    /// [`without_jit`] as [`connect`](Self::connect) does.
    ///
    /// # Errors
    /// [`Error::Migrate`] if the schema cannot be migrated.
    pub async fn from_pool(pool: PgPool, config: StoreConfig) -> Result<Self, Error> {
        migrate::POSTGRES.migrator().run(&pool).await?;
        Ok(Store::new(PostgresBackend { pool }, config))
    }

    /// The pool, for callers that share it.
    pub fn pool(&self) -> &PgPool {
        &self.backend.pool
    }
}

/// `options` with PostgreSQL's JIT compilation off. A claim's plan is
/// estimated costly enough (a recursive walk of the groups) for the
/// server to compile it on every run, which took longer than running it:
/// measured with `sluice bench jobs`, 20,000 jobs burnt down at 3.3k
/// jobs/s without JIT and under 50 jobs/s with it.
pub fn without_jit(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("jit", "off")])
}

impl Backend for PostgresBackend {
    type Tx = Transaction<'static, Postgres>;
    type Read = sqlx::pool::PoolConnection<Postgres>;

    fn dialect(&self) -> &'static Dialect {
        &sql::POSTGRES
    }

    async fn begin(&self) -> Result<Self::Tx, Error> {
        Ok(self.pool.begin().await?)
    }

    /// A claim does not wait for its commit to reach the disk, as on
    /// SQLite: lost to a crash of the server, it leaves its jobs available
    /// to run again, as a rescue would (at least once, as documented). The
    /// server writes its log in order, so a later commit that waits (the
    /// completion of one of those jobs) makes the claim durable first.
    ///
    /// And its statements run on their generic plans: the server otherwise
    /// plans a claim anew on each run (its estimate of a plan for the
    /// parameters bound stays below the generic one's), 1 to 2 ms of a
    /// 9 ms claim of 200, for the plan its shape forces anyway (the walk,
    /// the ranking of each group's first jobs, the lookups by id).
    async fn begin_claim(&self) -> Result<Self::Tx, Error> {
        let conn = self.pool.acquire().await?;
        let begin = "BEGIN; SET LOCAL synchronous_commit = off; \
                     SET LOCAL plan_cache_mode = force_generic_plan"
            .into_sql_str();
        Ok(Transaction::begin(conn, Some(begin)).await?)
    }

    async fn commit(tx: Self::Tx) -> Result<(), Error> {
        Ok(tx.commit().await?)
    }

    async fn read(&self) -> Result<Self::Read, Error> {
        Ok(self.pool.acquire().await?)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests;
