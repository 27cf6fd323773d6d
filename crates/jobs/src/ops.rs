//! The store logic, written once over [`Conn`](crate::backend::Conn) and run
//! by [`Store`](crate::Store) inside a transaction of its backend.

pub mod admin;
pub mod claim;
pub mod enqueue;
pub mod events;
pub mod flow;
pub mod lease;
pub mod schedule;

use crate::backend::{Conn, args};
use crate::error::Error;
use crate::job::{Job, JobId};
use crate::sql;

/// The error for a transition of job `id` that changed nothing because
/// the job was not in a state that allows `action`.
async fn refused(c: &mut impl Conn, id: JobId, action: &'static str) -> Error {
    match c.jobs(sql::GET, args![id]).await {
        Ok(jobs) => match jobs.first() {
            Some(job) => Error::InvalidTransition {
                id,
                state: job.state,
                action,
            },
            None => Error::NotFound(id),
        },
        Err(e) => e,
    }
}

/// The job a guarded transition of job `id` returned, or why it returned none.
async fn one<C: Conn>(
    c: &mut C,
    jobs: Vec<Job>,
    id: JobId,
    action: &'static str,
) -> Result<Job, Error> {
    match jobs.into_iter().next() {
        Some(job) => Ok(job),
        None => Err(refused(c, id, action).await),
    }
}
