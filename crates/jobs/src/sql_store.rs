//! [`Store`]: the [`JobStore`] of both SQL backends.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::backend::{Backend, Conn};
use crate::config::StoreConfig;
use crate::counts::QueueCounts;
use crate::error::Error;
use crate::events::{EventCursor, EventFilter, EventPage, JobEvent};
use crate::flow::NewFlow;
use crate::job::{Job, JobId, Lease};
use crate::new_job::NewJob;
use crate::ops::{admin, claim, enqueue, events, flow, lease, schedule};
use crate::retention::{Cleaned, Retention};
use crate::schedule::{NewSchedule, Schedule};
use crate::sql::Dialect;
use crate::store::{Enqueued, JobStore, ListFilter, Page, RetryDecision};
use crate::tally::{Counted, Counter, Tally};
use sluice_store::{Clock, Timestamp};

/// A job store on a SQL database; use [`SqliteStore`](crate::SqliteStore)
/// or [`PostgresStore`](crate::PostgresStore). Cheap to clone: clones share
/// the connection pools.
#[derive(Debug, Clone)]
pub struct Store<B> {
    pub(crate) backend: Arc<B>,
    clock: Arc<dyn Clock>,
    idempotency_ttl: Duration,
    counter: Arc<Counter>,
}

impl<B: Backend> Store<B> {
    pub(crate) fn new(backend: B, config: StoreConfig) -> Self {
        Self {
            backend: Arc::new(backend),
            clock: config.clock,
            idempotency_ttl: config.idempotency_ttl,
            counter: Arc::default(),
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The statements and commits this store (and its clones) has run so
    /// far: what a stretch of work cost, read as the difference of two
    /// tallies.
    pub fn tally(&self) -> Tally {
        self.counter.read()
    }

    /// The same store on another backend made of this one.
    pub(crate) fn map_backend<C>(self, f: impl FnOnce(Arc<B>) -> C) -> Store<C> {
        Store {
            backend: Arc::new(f(self.backend)),
            clock: self.clock,
            idempotency_ttl: self.idempotency_ttl,
            counter: self.counter,
        }
    }

    /// Closes the database's pools, waiting for connections in use to be
    /// returned.
    pub async fn close(&self) {
        self.backend.close().await;
    }

    /// `conn`, counting its statements.
    fn counted<'a, C>(&'a self, conn: &'a mut C) -> Counted<'a, C> {
        Counted {
            conn,
            counter: &self.counter,
        }
    }
}

/// Runs `$op` on a writing transaction of `$store` and commits it; an
/// error drops the transaction, which rolls it back.
macro_rules! in_tx {
    ($store:ident, |$tx:ident| $op:expr) => {{
        let mut tx = $store.backend.begin().await?;
        let $tx = &mut $store.counted(&mut *tx);
        let out = $op.await?;
        B::commit(tx).await?;
        $store.counter.commit(true);
        Ok(out)
    }};
}

/// What a batch of completions answers per item: the job as it now is
/// ([`JobStore::complete_many`]) or its id alone
/// ([`JobStore::complete_many_ids`]).
trait Completed: Sized + Send {
    /// Completes `done` with one statement ([`lease::complete_many`]).
    fn batch(
        c: &mut impl Conn,
        dialect: &Dialect,
        done: &[(Lease, Value)],
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<Result<Self, Error>>, Error>> + Send;
    /// The answer for a job completed alone.
    fn of(job: Job) -> Self;
}

/// Implements [`Completed`] for `$t`, whose batch is `$batch` and whose
/// answer for a job completed alone is `$of`.
macro_rules! completed {
    ($t:ty, $batch:path, $of:expr) => {
        impl Completed for $t {
            fn batch(
                c: &mut impl Conn,
                dialect: &Dialect,
                done: &[(Lease, Value)],
                now: Timestamp,
            ) -> impl Future<Output = Result<Vec<Result<Self, Error>>, Error>> + Send {
                $batch(c, dialect, done, now)
            }
            fn of(job: Job) -> Self {
                $of(job)
            }
        }
    };
}

completed!(Job, lease::complete_many, |job| job);
completed!(JobId, lease::complete_ids, |job: Job| job.id);

impl<B: Backend> Store<B> {
    /// Completes `done` in one transaction; if the database refuses the
    /// batch for what one item holds, one by one, so that item fails alone.
    async fn complete_batch<T: Completed>(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> Result<Vec<Result<T, Error>>, Error> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let whole: Result<_, Error> =
            async { in_tx!(self, |tx| T::batch(tx, self.backend.dialect(), &done, now)) }.await;
        match whole {
            Err(e) if done.len() > 1 && refused_item(&e) => {
                one_by_one("completions", &e, done.len());
                let mut out = Vec::with_capacity(done.len());
                for (held, result) in done {
                    out.push(self.complete(&held, result).await.map(T::of));
                }
                Ok(out)
            }
            whole => whole,
        }
    }
}

impl<B: Backend> JobStore for Store<B> {
    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, Error> {
        let now = self.now();
        in_tx!(self, |tx| enqueue::enqueue(
            tx,
            self.backend.dialect(),
            job,
            now,
            self.idempotency_ttl
        ))
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>, Error> {
        let now = self.now();
        in_tx!(self, |tx| enqueue::enqueue_batch(
            tx,
            self.backend.dialect(),
            jobs,
            now,
            self.idempotency_ttl
        ))
    }

    async fn get(&self, id: JobId) -> Result<Option<Job>, Error> {
        let mut conn = self.backend.read().await?;
        admin::get(&mut self.counted(&mut *conn), id).await
    }

    async fn list(&self, filter: &ListFilter) -> Result<Page, Error> {
        let mut conn = self.backend.read().await?;
        admin::list(&mut self.counted(&mut *conn), filter).await
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
        let jobs = claim::claim(
            &mut self.counted(&mut *tx),
            self.backend.dialect(),
            queue,
            worker,
            n,
            lease,
            now,
        )
        .await?;
        B::commit(tx).await?;
        self.counter.commit(false);
        Ok(jobs)
    }

    async fn heartbeat(&self, held: &Lease, extend: Duration) -> Result<Lease, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::heartbeat(tx, held, extend, now))
    }

    async fn heartbeat_many(
        &self,
        leases: Vec<Lease>,
        extend: Duration,
    ) -> Result<Vec<Result<Lease, Error>>, Error> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        in_tx!(self, |tx| lease::heartbeat_many(
            tx,
            self.backend.dialect(),
            &leases,
            extend,
            now
        ))
    }

    async fn progress(&self, held: &Lease, progress: Value) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::progress(tx, held, &progress, now))
    }

    async fn children(&self, parent: JobId) -> Result<Vec<Job>, Error> {
        let mut conn = self.backend.read().await?;
        flow::children(&mut self.counted(&mut *conn), parent).await
    }

    async fn complete(&self, held: &Lease, result: Value) -> Result<Job, Error> {
        let now = self.now();
        in_tx!(self, |tx| lease::complete(tx, held, &result, now))
    }

    async fn complete_many(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> Result<Vec<Result<Job, Error>>, Error> {
        self.complete_batch(done).await
    }

    async fn complete_many_ids(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> Result<Vec<Result<JobId, Error>>, Error> {
        self.complete_batch(done).await
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
        let whole: Result<_, Error> =
            async { in_tx!(self, |tx| lease::fail_many(tx, &failed, now)) }.await;
        match whole {
            Err(e) if failed.len() > 1 && refused_item(&e) => {
                one_by_one("failures", &e, failed.len());
                let mut out = Vec::with_capacity(failed.len());
                for (held, error, decision) in failed {
                    out.push(self.fail(&held, &error, decision).await);
                }
                Ok(out)
            }
            whole => whole,
        }
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
        admin::counts(&mut self.counted(&mut *conn)).await
    }

    async fn cleanup(&self, retention: &Retention) -> Result<Cleaned, Error> {
        let now = self.now();
        in_tx!(self, |tx| admin::cleanup(tx, retention, now))
    }
}

/// Whether the database refused a batch's statement for what it holds (a
/// constraint, a trigger, a value it cannot store), rather than being out
/// of reach or busy: then each item is worth writing on its own, so one
/// bad item does not send the batch's finished jobs back to run again
/// once their leases expire. Transient failures (connection, busy or
/// locked, serialization, out of resources) are not: written one by one
/// they would each wait out the same failure.
fn refused_item(e: &Error) -> bool {
    let Error::Database(sqlx::Error::Database(db)) = e else {
        return false;
    };
    let Some(code) = db.code() else {
        return true;
    };
    match code.parse::<u32>() {
        // SQLite's result codes (extended ones carry the primary code in
        // their low byte): BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN.
        Ok(n) => !matches!(n & 0xff, 5 | 6 | 7 | 10 | 13 | 14),
        // PostgreSQL's SQLSTATE classes: connection exception, transaction
        // rollback, insufficient resources, operator intervention, system error.
        Err(_) => !matches!(&code[..code.len().min(2)], "08" | "40" | "53" | "57" | "58"),
    }
}

fn one_by_one(what: &str, e: &Error, items: usize) {
    let mut cause = e.to_string();
    if let Some(source) = std::error::Error::source(e) {
        cause = format!("{cause}: {source}");
    }
    tracing::warn!(
        error = %cause,
        items,
        "jobs: the database refused a batch of {what}; writing them one by one"
    );
}

/// Schedules ([`crate::schedule`]): inherent, beside [`JobStore`], since
/// a worker pool never needs them.
impl<B: Backend> Store<B> {
    /// Stores a schedule, replacing the tenant's schedule of that name (its
    /// runs start again from 0). Answers it and whether it replaced one.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field (the tenant's 1,000th schedule
    /// included); [`Error::Database`].
    pub async fn put_schedule(&self, s: NewSchedule) -> Result<(Schedule, bool), Error> {
        let now = self.now();
        in_tx!(self, |tx| schedule::put(tx, &s, now))
    }

    /// The tenant's schedule `name`.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn schedule(&self, tenant: &str, name: &str) -> Result<Option<Schedule>, Error> {
        let mut conn = self.backend.read().await?;
        schedule::get(&mut self.counted(&mut *conn), tenant, name).await
    }

    /// The schedules of `tenant` (of every tenant if `None`), by name.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn schedules(&self, tenant: Option<&str>) -> Result<Vec<Schedule>, Error> {
        let mut conn = self.backend.read().await?;
        schedule::list(&mut self.counted(&mut *conn), tenant).await
    }

    /// Deletes the tenant's schedule `name`; whether there was one. The
    /// jobs it enqueued stay.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn delete_schedule(&self, tenant: &str, name: &str) -> Result<bool, Error> {
        in_tx!(self, |tx| schedule::delete(tx, tenant, name))
    }

    /// Fires the due ticks of up to `max` schedules, each once across
    /// every store on this database (see [`crate::schedule`]); answers the
    /// jobs this call enqueued.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn fire_schedules(&self, max: u32) -> Result<Vec<Job>, Error> {
        let now = self.now();
        in_tx!(self, |tx| schedule::fire(
            tx,
            self.backend.dialect(),
            max,
            now,
            self.idempotency_ttl
        ))
    }

    /// Stores a flow (see [`crate::flow`]) in one transaction: all of its
    /// jobs or none. Answers its jobs, parent first, in the order given;
    /// with an idempotency key its parent already holds, that parent alone.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the problem; [`Error::Database`].
    pub async fn enqueue_flow(&self, flow: NewFlow) -> Result<Vec<Job>, Error> {
        let now = self.now();
        in_tx!(self, |tx| flow::enqueue(
            tx,
            self.backend.dialect(),
            flow,
            now,
            self.idempotency_ttl
        ))
    }

    /// Up to `limit` job events after `cursor` (at most
    /// [`MAX_EVENTS`](crate::events::MAX_EVENTS)), those that pass
    /// `filter`, and the cursor to read on from (see [`crate::events`]).
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn events(
        &self,
        cursor: EventCursor,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<EventPage, Error> {
        let mut conn = self.backend.read().await?;
        events::read(
            &mut self.counted(&mut *conn),
            self.backend.dialect(),
            cursor,
            filter,
            limit,
        )
        .await
    }

    /// The first `limit` events of job `id` (at most
    /// [`MAX_EVENTS`](crate::events::MAX_EVENTS)), oldest first, while
    /// they are kept: its timeline. A `completed` event carries no result
    /// here (the job has it).
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn timeline(&self, id: JobId, limit: u32) -> Result<Vec<JobEvent>, Error> {
        let mut conn = self.backend.read().await?;
        events::of_job(&mut self.counted(&mut *conn), id, limit).await
    }

    /// The cursor that reads on after event `id` (a client's
    /// `Last-Event-ID`); see [`crate::events`].
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn event_cursor(&self, id: i64) -> Result<EventCursor, Error> {
        let mut conn = self.backend.read().await?;
        events::cursor_after(&mut self.counted(&mut *conn), self.backend.dialect(), id).await
    }

    /// The cursor after the last event written so far: where a reader
    /// that wants only what happens from now on starts.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn events_now(&self) -> Result<EventCursor, Error> {
        let mut conn = self.backend.read().await?;
        events::last(&mut self.counted(&mut *conn), self.backend.dialect()).await
    }
}
