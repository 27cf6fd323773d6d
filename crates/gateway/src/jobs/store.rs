//! One store type over both backends, so that the gateway, its routes and
//! the workers hold one concrete [`JobStore`] whichever the config names.

use std::time::Duration;

use serde_json::Value;
use sluice_jobs::{
    Cleaned, Enqueued, Error, Job, JobId, JobStore, Lease, ListFilter, NewJob, Page, PostgresStore,
    QueueCounts, Retention, RetryDecision, SqliteStore,
};

/// The gateway's job store: SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub enum AnyStore {
    /// The embedded file.
    Sqlite(SqliteStore),
    /// A shared database.
    Postgres(PostgresStore),
}

impl AnyStore {
    /// Closes the store's connections, waiting for those in use.
    pub async fn close(&self) {
        match self {
            AnyStore::Sqlite(s) => s.close().await,
            AnyStore::Postgres(s) => s.close().await,
        }
    }
}

/// Calls the same method on whichever store this is.
macro_rules! each {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $call.await,
            AnyStore::Postgres($s) => $call.await,
        }
    };
}

impl JobStore for AnyStore {
    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, Error> {
        each!(self, s => s.enqueue(job))
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>, Error> {
        each!(self, s => s.enqueue_batch(jobs))
    }

    async fn get(&self, id: JobId) -> Result<Option<Job>, Error> {
        each!(self, s => s.get(id))
    }

    async fn list(&self, filter: &ListFilter) -> Result<Page, Error> {
        each!(self, s => s.list(filter))
    }

    async fn claim(
        &self,
        queue: &str,
        worker: &str,
        n: u32,
        lease: Duration,
    ) -> Result<Vec<Job>, Error> {
        each!(self, s => s.claim(queue, worker, n, lease))
    }

    async fn heartbeat(&self, lease: &Lease, extend: Duration) -> Result<Lease, Error> {
        each!(self, s => s.heartbeat(lease, extend))
    }

    async fn heartbeat_many(
        &self,
        leases: Vec<Lease>,
        extend: Duration,
    ) -> Result<Vec<Result<Lease, Error>>, Error> {
        each!(self, s => s.heartbeat_many(leases, extend))
    }

    async fn complete(&self, lease: &Lease, result: Value) -> Result<Job, Error> {
        each!(self, s => s.complete(lease, result))
    }

    async fn complete_many(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> Result<Vec<Result<Job, Error>>, Error> {
        each!(self, s => s.complete_many(done))
    }

    async fn fail_many(
        &self,
        failed: Vec<(Lease, String, RetryDecision)>,
    ) -> Result<Vec<Result<Job, Error>>, Error> {
        each!(self, s => s.fail_many(failed))
    }

    async fn fail(
        &self,
        lease: &Lease,
        error: &str,
        decision: RetryDecision,
    ) -> Result<Job, Error> {
        each!(self, s => s.fail(lease, error, decision))
    }

    async fn rescue(&self) -> Result<Vec<Job>, Error> {
        each!(self, s => s.rescue())
    }

    async fn retry(&self, id: JobId) -> Result<Job, Error> {
        each!(self, s => s.retry(id))
    }

    async fn retry_dead(&self, queue: &str) -> Result<u64, Error> {
        each!(self, s => s.retry_dead(queue))
    }

    async fn cancel(&self, id: JobId) -> Result<Job, Error> {
        each!(self, s => s.cancel(id))
    }

    async fn purge_dead(&self, queue: Option<&str>) -> Result<u64, Error> {
        each!(self, s => s.purge_dead(queue))
    }

    async fn pause(&self, queue: &str) -> Result<(), Error> {
        each!(self, s => s.pause(queue))
    }

    async fn resume(&self, queue: &str) -> Result<(), Error> {
        each!(self, s => s.resume(queue))
    }

    async fn counts(&self) -> Result<Vec<QueueCounts>, Error> {
        each!(self, s => s.counts())
    }

    async fn cleanup(&self, retention: &Retention) -> Result<Cleaned, Error> {
        each!(self, s => s.cleanup(retention))
    }
}
