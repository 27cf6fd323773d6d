//! [`AnyStore`]: a job store on whichever database the configuration
//! names, as one type.
//!
//! The choice is made below [`JobStore`], at the [`Backend`]: the store's
//! one generic implementation of [`JobStore`] serves it, so every method
//! of the trait (present and future, batched ones included) runs as it
//! does on [`SqliteStore`] or [`PostgresStore`]: there is no second copy
//! of the trait's methods to forget one in. What is written here forwards
//! [`Backend`] and [`Conn`], neither of which has a default method, so a
//! method added to either is a compile error here until it is forwarded.

use std::ops::DerefMut;
use std::sync::Arc;

use crate::backend::{Args, Backend, Conn};
use crate::error::Error;
use crate::job::{Job, JobSummary};
use crate::postgres::{PostgresBackend, PostgresStore};
use crate::sql::Dialect;
use crate::sql_store::Store;
use crate::sqlite::{SqliteBackend, SqliteStore};

/// A job store on SQLite or PostgreSQL, chosen at run time: what a server
/// that reads its database from its configuration holds. Built from
/// either store with `From`.
///
/// ```
/// use sluice_jobs::{AnyStore, JobStore, NewJob, SqliteStore, StoreConfig};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), sluice_jobs::Error> {
/// let store = AnyStore::from(SqliteStore::in_memory(StoreConfig::default()).await?);
/// let job = store.enqueue(NewJob::new("default", "echo", json!({}))).await?.job;
/// assert_eq!(store.get(job.id).await?.map(|j| j.kind), Some("echo".to_owned()));
/// store.close().await;
/// # Ok(())
/// # }
/// ```
pub type AnyStore = Store<AnyBackend>;

/// The backend of an [`AnyStore`]: one of the two.
#[derive(Debug, Clone)]
pub enum AnyBackend {
    /// A SQLite file or in-memory database.
    Sqlite(SqliteBackend),
    /// A PostgreSQL database.
    Postgres(PostgresBackend),
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        store.map_backend(|b| AnyBackend::Sqlite(Arc::unwrap_or_clone(b)))
    }
}

impl From<PostgresStore> for AnyStore {
    fn from(store: PostgresStore) -> Self {
        store.map_backend(|b| AnyBackend::Postgres(Arc::unwrap_or_clone(b)))
    }
}

/// A transaction or connection of either backend.
#[derive(Debug)]
pub enum Either<S, P> {
    /// SQLite's.
    Sqlite(S),
    /// PostgreSQL's.
    Postgres(P),
}

type Tx<B> = <B as Backend>::Tx;
type Read<B> = <B as Backend>::Read;

impl Backend for AnyBackend {
    // Boxed: a transaction must deref to the connection it runs on, and
    // the enum is that connection. One allocation per transaction, beside
    // a round trip to the database.
    type Tx = Box<Either<Tx<SqliteBackend>, Tx<PostgresBackend>>>;
    type Read = Box<Either<Read<SqliteBackend>, Read<PostgresBackend>>>;

    fn dialect(&self) -> &'static Dialect {
        match self {
            AnyBackend::Sqlite(b) => b.dialect(),
            AnyBackend::Postgres(b) => b.dialect(),
        }
    }

    async fn begin(&self) -> Result<Self::Tx, Error> {
        Ok(Box::new(match self {
            AnyBackend::Sqlite(b) => Either::Sqlite(b.begin().await?),
            AnyBackend::Postgres(b) => Either::Postgres(b.begin().await?),
        }))
    }

    async fn begin_claim(&self) -> Result<Self::Tx, Error> {
        Ok(Box::new(match self {
            AnyBackend::Sqlite(b) => Either::Sqlite(b.begin_claim().await?),
            AnyBackend::Postgres(b) => Either::Postgres(b.begin_claim().await?),
        }))
    }

    async fn commit(tx: Self::Tx) -> Result<(), Error> {
        match *tx {
            Either::Sqlite(tx) => SqliteBackend::commit(tx).await,
            Either::Postgres(tx) => PostgresBackend::commit(tx).await,
        }
    }

    async fn read(&self) -> Result<Self::Read, Error> {
        Ok(Box::new(match self {
            AnyBackend::Sqlite(b) => Either::Sqlite(b.read().await?),
            AnyBackend::Postgres(b) => Either::Postgres(b.read().await?),
        }))
    }

    async fn close(&self) {
        match self {
            AnyBackend::Sqlite(b) => b.close().await,
            AnyBackend::Postgres(b) => b.close().await,
        }
    }
}

/// Forwards each statement to the connection this is.
impl<S, P> Conn for Either<S, P>
where
    S: DerefMut<Target: Conn + Sized> + Send,
    P: DerefMut<Target: Conn + Sized> + Send,
{
    async fn jobs(&mut self, sql: &'static str, args: Args) -> Result<Vec<Job>, Error> {
        match self {
            Either::Sqlite(c) => c.jobs(sql, args).await,
            Either::Postgres(c) => c.jobs(sql, args).await,
        }
    }

    async fn claimed(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> Result<Vec<(Job, i64, i64)>, Error> {
        match self {
            Either::Sqlite(c) => c.claimed(sql, args).await,
            Either::Postgres(c) => c.claimed(sql, args).await,
        }
    }

    async fn summaries(&mut self, sql: &'static str, args: Args) -> Result<Vec<JobSummary>, Error> {
        match self {
            Either::Sqlite(c) => c.summaries(sql, args).await,
            Either::Postgres(c) => c.summaries(sql, args).await,
        }
    }

    async fn ints(&mut self, sql: &'static str, args: Args) -> Result<Vec<i64>, Error> {
        match self {
            Either::Sqlite(c) => c.ints(sql, args).await,
            Either::Postgres(c) => c.ints(sql, args).await,
        }
    }

    async fn texts(&mut self, sql: &'static str, args: Args) -> Result<Vec<String>, Error> {
        match self {
            Either::Sqlite(c) => c.texts(sql, args).await,
            Either::Postgres(c) => c.texts(sql, args).await,
        }
    }

    async fn pairs(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> Result<Vec<(String, String)>, Error> {
        match self {
            Either::Sqlite(c) => c.pairs(sql, args).await,
            Either::Postgres(c) => c.pairs(sql, args).await,
        }
    }

    async fn counts(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> Result<Vec<(String, String, i64)>, Error> {
        match self {
            Either::Sqlite(c) => c.counts(sql, args).await,
            Either::Postgres(c) => c.counts(sql, args).await,
        }
    }

    async fn records<T: Send>(
        &mut self,
        sql: &'static str,
        args: Args,
        decode: fn(&dyn sluice_store::Columns) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        match self {
            Either::Sqlite(c) => c.records(sql, args, decode).await,
            Either::Postgres(c) => c.records(sql, args, decode).await,
        }
    }

    async fn execute(&mut self, sql: &'static str, args: Args) -> Result<u64, Error> {
        match self {
            Either::Sqlite(c) => c.execute(sql, args).await,
            Either::Postgres(c) => c.execute(sql, args).await,
        }
    }
}
