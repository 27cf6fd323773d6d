//! The store trait every backend implements, and the small types it speaks.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::counts::QueueCounts;
use crate::error::Error;
use crate::job::{Job, JobId, JobState, JobSummary, Lease};
use crate::new_job::NewJob;
use crate::retention::{Cleaned, Retention};
use sluice_store::Timestamp;

/// Durable storage of jobs with leased, at-least-once delivery.
///
/// Every state change is guarded by the state it starts from (and, for a
/// running job, by the caller's [`Lease`]), so two callers racing for one
/// job cannot both win: a claim never hands out a job another claim holds,
/// and a worker whose lease was lost cannot complete or fail the job.
///
/// Time comes from the store's [`Clock`](crate::Clock) ([`StoreConfig`](crate::StoreConfig)).
pub trait JobStore: Send + Sync {
    /// Stores a job. With an idempotency key that the same tenant used for
    /// a job within the TTL, stores nothing and returns that job instead,
    /// marked as a duplicate.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the bad field; [`Error::Database`].
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<Enqueued, Error>> + Send;

    /// [`enqueue`](Self::enqueue) for many jobs in one transaction: all are
    /// stored or none (an invalid job fails the batch). Answers in order.
    ///
    /// # Errors
    /// As [`enqueue`](Self::enqueue).
    fn enqueue_batch(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<Enqueued>, Error>> + Send;

    /// The job with this id, if it exists.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<Job>, Error>> + Send;

    /// One page of jobs in id order, filtered by queue, state and tenant,
    /// without their payloads and results (see [`JobSummary`]).
    ///
    /// # Errors
    /// [`Error::Database`].
    fn list(&self, filter: &ListFilter) -> impl Future<Output = Result<Page, Error>> + Send;

    /// Leases up to `n` due jobs of `queue` to `worker` for `lease`, and
    /// marks them running. Takes turns across the queue's tenants (the
    /// tenant served least recently first), within a tenant across its
    /// groups (likewise), and within a group the highest priority first,
    /// then the earliest `run_at`. Groups are per tenant: two tenants that
    /// name the same group take separate turns. A paused queue gives
    /// nothing.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty worker id; [`Error::Database`].
    fn claim(
        &self,
        queue: &str,
        worker: &str,
        n: u32,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, Error>> + Send;

    /// Extends a lease to `extend` from now and returns the renewed lease.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] if the job was rescued, claimed again or
    /// cancelled; [`Error::NotFound`].
    fn heartbeat(
        &self,
        lease: &Lease,
        extend: Duration,
    ) -> impl Future<Output = Result<Lease, Error>> + Send;

    /// [`heartbeat`](Self::heartbeat) for many leases at once, in one
    /// statement where the backend can: answers one result per lease, in
    /// order, each guarded on its own, so a lease that no longer holds
    /// fails alone ([`Error::LeaseLost`] or [`Error::NotFound`]). The
    /// default renews them one by one.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a zero `extend`; [`Error::Database`] if the
    /// batch as a whole could not be written (then none of it was).
    fn heartbeat_many(
        &self,
        leases: Vec<Lease>,
        extend: Duration,
    ) -> impl Future<Output = Result<Vec<Result<Lease, Error>>, Error>> + Send {
        async move {
            let mut out = Vec::with_capacity(leases.len());
            for lease in leases {
                out.push(match self.heartbeat(&lease, extend).await {
                    Err(e @ Error::Invalid { .. }) => return Err(e),
                    answer => answer,
                });
            }
            Ok(out)
        }
    }

    /// Records what a leased job's run reports of its progress (a percent
    /// or any JSON, at most 16 KiB as text): readable with the job, and a
    /// `progress` event. Stores that keep no progress refuse it.
    ///
    /// # Errors
    /// As [`heartbeat`](Self::heartbeat); [`Error::Invalid`] for progress
    /// too long.
    fn progress(
        &self,
        lease: &Lease,
        progress: Value,
    ) -> impl Future<Output = Result<Job, Error>> + Send {
        let _ = (lease, progress);
        async {
            Err(Error::Invalid {
                field: "progress",
                reason: "this store keeps no progress",
            })
        }
    }

    /// The children of flow parent `parent` (see [`crate::flow`]), in id
    /// order, with their results. Stores without flows refuse it.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn children(&self, parent: JobId) -> impl Future<Output = Result<Vec<Job>, Error>> + Send {
        let _ = parent;
        async {
            Err(Error::Invalid {
                field: "parent",
                reason: "this store keeps no flows",
            })
        }
    }

    /// Marks a leased job completed with its result; the attempt counts.
    ///
    /// # Errors
    /// As [`heartbeat`](Self::heartbeat).
    fn complete(
        &self,
        lease: &Lease,
        result: Value,
    ) -> impl Future<Output = Result<Job, Error>> + Send;

    /// [`complete`](Self::complete) for many leased jobs at once, in one
    /// transaction where the backend can: answers one result per item, in
    /// order. Each item is guarded by its own lease, so a stale one fails
    /// alone ([`Error::LeaseLost`] or [`Error::NotFound`]) and the others
    /// still complete; a lease given twice completes once and the repeat
    /// answers [`Error::LeaseLost`]. The default completes them one by one;
    /// so do the SQL stores when the database refuses the batch's statement
    /// for what one item holds (a constraint, a trigger), so that item fails
    /// alone.
    ///
    /// # Errors
    /// [`Error::Database`] if the batch as a whole could not be written
    /// (then none of it was): the database is out of reach or busy.
    fn complete_many(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> impl Future<Output = Result<Vec<Result<Job, Error>>, Error>> + Send {
        async move {
            let mut out = Vec::with_capacity(done.len());
            for (lease, result) in done {
                out.push(self.complete(&lease, result).await);
            }
            Ok(out)
        }
    }

    /// [`complete_many`](Self::complete_many) answering, for each item
    /// completed, only its job's id, not the job as it now is: what a
    /// [`WorkerPool`](crate::worker::WorkerPool)'s batches need, and the
    /// SQL stores then read nothing else back. The default calls
    /// [`complete_many`](Self::complete_many).
    ///
    /// # Errors
    /// As [`complete_many`](Self::complete_many).
    fn complete_many_ids(
        &self,
        done: Vec<(Lease, Value)>,
    ) -> impl Future<Output = Result<Vec<Result<JobId, Error>>, Error>> + Send {
        async move {
            let answers = self.complete_many(done).await?;
            Ok(answers.into_iter().map(|a| a.map(|job| job.id)).collect())
        }
    }

    /// Records a failed run of a leased job and what happens next (see
    /// [`RetryDecision`]).
    ///
    /// # Errors
    /// As [`heartbeat`](Self::heartbeat).
    fn fail(
        &self,
        lease: &Lease,
        error: &str,
        decision: RetryDecision,
    ) -> impl Future<Output = Result<Job, Error>> + Send;

    /// [`fail`](Self::fail) for many leased jobs at once, in one
    /// transaction where the backend can: answers one result per item, in
    /// order, each item guarded by its own lease as in
    /// [`complete_many`](Self::complete_many). The default fails them one
    /// by one, as the SQL stores do when the database refuses the batch
    /// for what one item holds.
    ///
    /// # Errors
    /// [`Error::Database`] if the batch as a whole could not be written
    /// (then none of it was).
    fn fail_many(
        &self,
        failed: Vec<(Lease, String, RetryDecision)>,
    ) -> impl Future<Output = Result<Vec<Result<Job, Error>>, Error>> + Send {
        async move {
            let mut out = Vec::with_capacity(failed.len());
            for (lease, error, decision) in failed {
                out.push(self.fail(&lease, &error, decision).await);
            }
            Ok(out)
        }
    }

    /// Takes back every running job whose lease has expired: its worker is
    /// presumed dead. The lost run counts as an attempt; the job becomes
    /// retryable at once, or dead if that was its last attempt. Only an
    /// expired lease is rescued, never a job merely running for long.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn rescue(&self) -> impl Future<Output = Result<Vec<Job>, Error>> + Send;

    /// Makes one dead job available again with its attempts reset.
    ///
    /// # Errors
    /// [`Error::InvalidTransition`] unless the job is dead; [`Error::NotFound`].
    fn retry(&self, id: JobId) -> impl Future<Output = Result<Job, Error>> + Send;

    /// [`retry`](Self::retry) for every dead job of `queue`; returns how many.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn retry_dead(&self, queue: &str) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Cancels a job that has not finished. A running job's lease is lost.
    ///
    /// # Errors
    /// [`Error::InvalidTransition`] if it is completed, dead or cancelled;
    /// [`Error::NotFound`].
    fn cancel(&self, id: JobId) -> impl Future<Output = Result<Job, Error>> + Send;

    /// Deletes the dead jobs of `queue` (of every queue if `None`); returns how many.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn purge_dead(&self, queue: Option<&str>) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Stops claims from `queue`; running jobs go on.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty queue name; [`Error::Database`].
    fn pause(&self, queue: &str) -> impl Future<Output = Result<(), Error>> + Send;

    /// Lets claims take from `queue` again.
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    fn resume(&self, queue: &str) -> impl Future<Output = Result<(), Error>> + Send;

    /// Jobs by state for every queue that has jobs or was paused, by name.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn counts(&self) -> impl Future<Output = Result<Vec<QueueCounts>, Error>> + Send;

    /// Deletes finished jobs older than `retention` allows and forgets
    /// expired idempotency keys. A finished job stays while its idempotency
    /// key lives, so that a duplicate enqueue can still be answered with it.
    ///
    /// # Errors
    /// [`Error::Database`].
    fn cleanup(&self, retention: &Retention)
    -> impl Future<Output = Result<Cleaned, Error>> + Send;
}

/// The answer to an enqueue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enqueued {
    /// The stored job: the new one, or the original for a duplicate.
    pub job: Job,
    /// Whether the idempotency key matched an earlier job (nothing stored).
    pub duplicate: bool,
}

/// What happens to a job after a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Uses an attempt and runs again at this instant (retryable), or goes
    /// dead if that was the last attempt.
    RetryAt(Timestamp),
    /// Runs again at this instant without using an attempt (scheduled): the
    /// upstream said 429 with `Retry-After`, the job itself is fine.
    /// Counted in [`Job::reschedules`] so that a worker can bound it.
    RescheduleAt(Timestamp),
    /// Uses an attempt and goes dead now: retrying cannot help (a 4xx, an
    /// invalid payload).
    Dead,
}

/// The most jobs one [`JobStore::list`] page holds.
pub const MAX_PAGE: u32 = 1_000;

/// Which jobs [`JobStore::list`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFilter {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this state.
    pub state: Option<JobState>,
    /// Only this tenant's jobs (filtered in the query, by index).
    pub tenant: Option<String>,
    /// Only ids after this one: the previous page's [`Page::next`].
    pub after: Option<JobId>,
    /// At most this many (capped at [`MAX_PAGE`]); 100 by default.
    pub limit: u32,
}

impl Default for ListFilter {
    fn default() -> Self {
        Self {
            queue: None,
            state: None,
            tenant: None,
            after: None,
            limit: 100,
        }
    }
}

/// One page of [`JobStore::list`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The jobs, in id order.
    pub jobs: Vec<JobSummary>,
    /// The cursor for the next page, if the page was full.
    pub next: Option<JobId>,
}
