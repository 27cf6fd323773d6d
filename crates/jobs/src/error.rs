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
    /// The database file (or a page of it) is damaged: SQLite's
    /// `SQLITE_CORRUPT` or `SQLITE_NOTADB`, PostgreSQL's `XX001`/`XX002`.
    /// Retrying does not help; see [`Error::is_damaged`].
    #[error("the job store's database is damaged: {0}")]
    Damaged(String),
    /// The schema could not be brought up to date.
    #[error("migrating the job store failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// SQLite's primary result codes for a damaged file: `SQLITE_CORRUPT`
/// and `SQLITE_NOTADB` (the extended codes carry them in the low byte).
const SQLITE_DAMAGED: [i64; 2] = [11, 26];

/// PostgreSQL's `data_corrupted` and `index_corrupted`.
const POSTGRES_DAMAGED: [&str; 2] = ["XX001", "XX002"];

impl Error {
    /// Whether the database said its file is damaged (a corrupt page, a
    /// file that is not a database): a fault no retry repairs, unlike a
    /// busy or unreachable database.
    pub fn is_damaged(&self) -> bool {
        match self {
            Error::Damaged(_) => true,
            Error::Database(sqlx::Error::Database(db)) => {
                db.code().is_some_and(|code| match code.parse::<i64>() {
                    Ok(n) => SQLITE_DAMAGED.contains(&(n & 0xff)),
                    Err(_) => POSTGRES_DAMAGED.contains(&code.as_ref()),
                })
            }
            _ => false,
        }
    }
}
