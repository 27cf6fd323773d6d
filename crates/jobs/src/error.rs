//! What can go wrong with a job store.

use crate::job::{JobId, JobState};

/// An error from a [`JobStore`](crate::JobStore).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No job has this id (never enqueued, or deleted by retention or purge).
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The caller's lease on the job is gone: it expired and the job was
    /// rescued (and perhaps claimed again), or the job was cancelled. The
    /// worker must stop; its outcome is not recorded.
    #[error("lease on job {0} was lost")]
    LeaseLost(JobId),
    /// The job is in a state that does not allow the operation, e.g.
    /// retrying a job that is not dead.
    #[error("job {id} is {state}: cannot {action} it")]
    InvalidTransition {
        /// The job.
        id: JobId,
        /// Its current state.
        state: JobState,
        /// What was asked: `cancel`, `retry`, …
        action: &'static str,
    },
    /// A field of a job or a call is invalid.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field, as named in the API: `queue`, `max_attempts`, …
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A stored row could not be read back as a job.
    #[error("stored job is corrupt: {0}")]
    Corrupt(String),
    /// The database failed or could not be reached.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// A database error that failed a whole batch of calls (see
    /// [`JobStore::complete_many`](crate::JobStore::complete_many)), as
    /// each call of the batch sees it.
    #[error("database error in a batch: {0}")]
    Batch(String),
    /// The schema could not be brought up to date.
    #[error("migrating the job store failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}
