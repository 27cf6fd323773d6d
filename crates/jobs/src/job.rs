//! The job model: what a job is, the states it moves through, and the lease
//! a worker holds while it runs one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use sluice_store::Timestamp;

/// A job's id: a 64-bit integer the store assigns from an ever-increasing
/// sequence (never reused, even after a job is deleted), so ids sort in
/// enqueue order and serve as list cursors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for JobId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(JobId)
    }
}

/// Where a job is in its life.
///
/// ```text
/// enqueue  ─▶ available, or scheduled if run_at is later
/// claim    ─  available | scheduled | retryable, run_at due ─▶ running
/// running  ─ complete ─▶ completed
///          ─ fail RetryAt, rescue ─▶ retryable (dead if attempts are used up)
///          ─ fail RescheduleAt ─▶ scheduled (no attempt used)
///          ─ fail Dead ─▶ dead ─ retry ─▶ available
/// cancel   ─  available | scheduled | running | retryable ─▶ cancelled
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Ready to be claimed now.
    Available,
    /// Waiting for its `run_at`: enqueued for later, or rescheduled by an
    /// upstream's `Retry-After` without using an attempt.
    Scheduled,
    /// Claimed by a worker that holds its lease.
    Running,
    /// Failed (or its worker vanished) and will be claimable again at `run_at`.
    Retryable,
    /// Finished successfully; its result is kept.
    Completed,
    /// Failed for good: attempts used up, or an error retrying cannot fix.
    /// The dead-letter state: inspect, retry or purge.
    Dead,
    /// Cancelled by an operator before it finished.
    Cancelled,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 7] = [
        JobState::Available,
        JobState::Scheduled,
        JobState::Running,
        JobState::Retryable,
        JobState::Completed,
        JobState::Dead,
        JobState::Cancelled,
    ];

    /// The state's name as stored and shown: `available`, `dead`, …
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Completed => "completed",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether the job is done and will never run again by itself.
    pub const fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Dead | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`JobState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// The right to run one job, handed out by a claim. Every call that
/// finishes or extends the run presents it; once the lease is lost (rescued
/// after expiry, or the job cancelled) those calls are refused, so a worker
/// that was presumed dead cannot overwrite the outcome of the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The leased job.
    pub job: JobId,
    /// The worker that claimed it.
    pub owner: String,
    /// Which claim of the job this is (1 for the first), so that a worker
    /// that claims the same job again holds a different lease.
    pub token: i64,
    /// When the lease runs out unless a heartbeat extends it.
    pub expires_at: Timestamp,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Assigned by the store.
    pub id: JobId,
    /// The queue it waits in; pause, counts and claims are per queue.
    pub queue: String,
    /// What to do, e.g. `http` or `discord.create_role`.
    pub kind: String,
    /// The kind's arguments.
    pub payload: Value,
    /// Who enqueued it; idempotency keys are per tenant.
    pub tenant: String,
    /// The fairness group, one of its tenant's: claims take turns across
    /// the tenants of a queue, then across the groups of each tenant.
    pub group: String,
    /// Higher runs first within its group.
    pub priority: i32,
    /// The key that deduplicates enqueues of this job, if any.
    pub idempotency_key: Option<String>,
    /// Attempts used so far: finished runs and runs lost with their lease.
    /// A run in progress is not counted until it ends.
    pub attempts: u32,
    /// Attempts allowed before the job is dead.
    pub max_attempts: u32,
    /// Times it was rescheduled without using an attempt (upstream 429s),
    /// so that a worker can bound them.
    pub reschedules: u32,
    /// Not claimable before this instant.
    pub run_at: Timestamp,
    /// Where it is in its life.
    pub state: JobState,
    /// The error of the last failed or lost attempt.
    pub last_error: Option<String>,
    /// What the successful run returned.
    pub result: Option<Value>,
    /// The lease of the worker running it (state `running` only).
    pub lease: Option<Lease>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it reached `completed`, `dead` or `cancelled`.
    pub finished_at: Option<Timestamp>,
    /// The W3C `traceparent` of the request that enqueued it, if any: its
    /// attempts continue that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The schedule that enqueued it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The tick of its schedule it was enqueued for (its `run_at` is when
    /// that tick fired, later after downtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_tick: Option<Timestamp>,
    /// What its kind last reported of its progress (a percent or any
    /// JSON), while it runs and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// The flow parent it is a child of, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<JobId>,
    /// For a flow parent: the children it still waits for (it is
    /// `scheduled` until they are done).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pending_children: u32,
    /// For a flow parent: `fail` (a child dead or cancelled fails it) or
    /// `ignore` (it counts as done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_child_failure: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A job as a list shows it: every field of [`Job`] but its payload and
/// result, which may be megabytes each and are read one job at a time
/// ([`JobStore::get`](crate::JobStore::get)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    /// See [`Job::id`].
    pub id: JobId,
    /// See [`Job::queue`].
    pub queue: String,
    /// See [`Job::kind`].
    pub kind: String,
    /// See [`Job::tenant`].
    pub tenant: String,
    /// See [`Job::group`].
    pub group: String,
    /// See [`Job::priority`].
    pub priority: i32,
    /// See [`Job::idempotency_key`].
    pub idempotency_key: Option<String>,
    /// See [`Job::attempts`].
    pub attempts: u32,
    /// See [`Job::max_attempts`].
    pub max_attempts: u32,
    /// See [`Job::reschedules`].
    pub reschedules: u32,
    /// See [`Job::run_at`].
    pub run_at: Timestamp,
    /// See [`Job::state`].
    pub state: JobState,
    /// See [`Job::last_error`] (at most [`MAX_ERROR_LEN`](crate::MAX_ERROR_LEN) bytes).
    pub last_error: Option<String>,
    /// See [`Job::lease`].
    pub lease: Option<Lease>,
    /// See [`Job::created_at`].
    pub created_at: Timestamp,
    /// See [`Job::updated_at`].
    pub updated_at: Timestamp,
    /// See [`Job::finished_at`].
    pub finished_at: Option<Timestamp>,
}

impl Job {
    /// The job with `payload` and `result` added to `summary`.
    pub(crate) fn from_summary(
        s: JobSummary,
        payload: Value,
        result: Option<Value>,
        traceparent: Option<String>,
    ) -> Self {
        Self {
            id: s.id,
            queue: s.queue,
            kind: s.kind,
            payload,
            tenant: s.tenant,
            group: s.group,
            priority: s.priority,
            idempotency_key: s.idempotency_key,
            attempts: s.attempts,
            max_attempts: s.max_attempts,
            reschedules: s.reschedules,
            run_at: s.run_at,
            state: s.state,
            last_error: s.last_error,
            result,
            lease: s.lease,
            created_at: s.created_at,
            updated_at: s.updated_at,
            finished_at: s.finished_at,
            traceparent,
            schedule: None,
            schedule_tick: None,
            progress: None,
            parent: None,
            pending_children: 0,
            on_child_failure: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        assert!("done".parse::<JobState>().is_err());
    }
}
