//! [`Store`]: the [`JobStore`] of both SQL backends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::backend::Backend;
use crate::clock::{Clock, Timestamp};
use crate::config::StoreConfig;
use crate::counts::QueueCounts;
use crate::error::Error;
use crate::job::{Job, JobId, Lease};
use crate::new_job::NewJob;
use crate::ops::{admin, claim, enqueue, lease};
use crate::retention::{Cleaned, Retention};
use crate::store::{Enqueued, JobStore, ListFilter, Page, RetryDecision};

/// A job store on a SQL database; use [`SqliteStore`](crate::SqliteStore)
/// or [`PostgresStore`](crate::PostgresStore). Cheap to clone: clones share
/// the connection pools.
#[derive(Debug, Clone)]
pub struct Store<B> {
    pub(crate) backend: Arc<B>,
    clock: Arc<dyn Clock>,
    idempotency_ttl: Duration,
}

impl<B: Backend> Store<B> {
    pub(crate) fn new(backend: B, config: StoreConfig) -> Self {
        Self {
            backend: Arc::new(backend),
            clock: config.clock,
            idempotency_ttl: config.idempotency_ttl,
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// Runs `$op` on a writing transaction of `$store` and commits it; an
/// error drops the transaction, which rolls it back.
macro_rules! in_tx {
    ($store:ident, |$tx:ident| $op:expr) => {{
        let mut tx = $store.backend.begin().await?;
        let $tx = &mut *tx;
        let out = $op.await?;
        B::commit(tx).await?;
        Ok(out)
    }};
}

impl<B: Backend> JobStore for Store<B> {
    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, Error> {
        let now = self.now();
        in_tx!(self, |tx| enqueue::enqueue(
            tx,
            job,
            now,
            self.idempotency_ttl
        ))
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>, Error> {
        let now = self.now();
        in_tx!(self, |tx| enqueue::enqueue_batch(
            tx,
            jobs,
            now,
            self.idempotency_ttl
        ))
    }

    async fn get(&self, id: JobId) -> Result<Option<Job>, Error> {
        let mut conn = self.backend.read().await?;
        admin::get(&mut *conn, id).await
    }

    async fn list(&self, filter: &ListFilter) -> Result<Page, Error> {
        let mut conn = self.backend.read().await?;
        admin::list(&mut *conn, filter).await
    }

    async fn claim(
        &self,
        queue: &str,
        worker: &str,
        n: u32,
        lease: Duration,
    ) -> Result<Vec<Job>, Error> {
        let now = self.now();
        let mut tx = self.backend.begin_claim().await?;
        let jobs = claim::claim(&mut *tx, B::DIALECT, queue, worker, n, lease, now).await?;
        B::commit(tx).await?;
        Ok(jobs)
    }

    async fn heartbeat(&self, held: &Lease, extend: Duration) -> Result<Lease, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::heartbeat(tx, held, extend, now))
    }

    async fn complete(&self, held: &Lease, result: Value) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::complete(tx, held, &result, now))
    }

    async fn complete_many(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> Result<Vec<Result<Job, Error>>, Error> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        in_tx!(self, |tx| lease::complete_many(tx, B::DIALECT, done, now))
    }

    async fn fail(&self, held: &Lease, error: &str, decision: RetryDecision) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::fail(tx, held, error, decision, now))
    }

    async fn fail_many(
        &self,
        failed: Vec<(Lease, String, RetryDecision)>,
    ) -> Result<Vec<Result<Job, Error>>, Error> {
        if failed.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        in_tx!(self, |tx| lease::fail_many(tx, failed, now))
    }

    async fn rescue(&self) -> Result<Vec<Job>, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::rescue(tx, now))
    }

    async fn retry(&self, id: JobId) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::retry(tx, id, now))
    }

    async fn retry_dead(&self, queue: &str) -> Result<u64, Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::retry_dead(tx, queue, now))
    }

    async fn cancel(&self, id: JobId) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::cancel(tx, id, now))
    }

    async fn purge_dead(&self, queue: Option<&str>) -> Result<u64, Error> {
        in_tx!(self, |tx| admin::purge_dead(tx, queue))
    }

    async fn pause(&self, queue: &str) -> Result<(), Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::set_paused(tx, queue, true, now))
    }

    async fn resume(&self, queue: &str) -> Result<(), Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::set_paused(tx, queue, false, now))
    }

    async fn counts(&self) -> Result<Vec<QueueCounts>, Error> {
        let mut conn = self.backend.read().await?;
        admin::counts(&mut *conn).await
    }

    async fn cleanup(&self, retention: &Retention) -> Result<Cleaned, Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::cleanup(tx, retention, now))
    }
}
