//! Storing a flow (see [`crate::flow`]) and reading a parent's children.

use std::time::Duration;

use crate::backend::{Conn, args};
use crate::error::Error;
use crate::flow::{Child, NewFlow};
use crate::job::{Job, JobId};
use crate::sql::Dialect;
use sluice_store::Timestamp;

/// The `run_at` of a parent waiting for its children: no promotion
/// reaches it (the year 285,000); the last child's end sets the real one.
pub const WAITING: Timestamp = Timestamp::from_millis(9_000_000_000_000_000);

const SET_PARENT: &str =
    "UPDATE jobs SET pending_children = $2, on_child_failure = $3 WHERE id = $1";
const SET_CHILD: &str = "UPDATE jobs SET parent_id = $2 WHERE id = $1";
const CHILDREN: &str = "SELECT * FROM jobs WHERE parent_id = $1 ORDER BY id";

/// Stores `flow` in the caller's transaction: its jobs, parent first, in
/// the order given (a nested flow's parent, then its children). With an
/// idempotency key the parent already holds, stores nothing and answers
/// that parent alone.
pub async fn enqueue(
    c: &mut impl Conn,
    dialect: &Dialect,
    flow: NewFlow,
    now: Timestamp,
    ttl: Duration,
) -> Result<Vec<Job>, Error> {
    flow.validate()?;
    let mut out = Vec::with_capacity(flow.size());
    store(c, dialect, flow, None, now, ttl, &mut out).await?;
    Ok(out)
}

async fn store(
    c: &mut impl Conn,
    dialect: &Dialect,
    flow: NewFlow,
    under: Option<JobId>,
    now: Timestamp,
    ttl: Duration,
    out: &mut Vec<Job>,
) -> Result<(), Error> {
    let NewFlow {
        parent,
        children,
        on_child_failure,
    } = flow;
    let done = super::enqueue::enqueue(c, dialect, parent.run_at(WAITING), now, ttl).await?;
    if done.duplicate {
        out.push(done.job);
        return Ok(());
    }
    let mut parent = done.job;
    let n = i64::try_from(children.len()).unwrap_or(i64::MAX);
    c.execute(SET_PARENT, args![parent.id, n, on_child_failure.as_str()])
        .await?;
    if let Some(up) = under {
        c.execute(SET_CHILD, args![parent.id, up]).await?;
        parent.parent = Some(up);
    }
    parent.pending_children = u32::try_from(n).unwrap_or(u32::MAX);
    parent.on_child_failure = Some(on_child_failure.as_str().to_owned());
    let id = parent.id;
    out.push(parent);
    for child in children {
        match child {
            Child::Job(job) => {
                let mut job = super::enqueue::enqueue(c, dialect, job, now, ttl)
                    .await?
                    .job;
                c.execute(SET_CHILD, args![job.id, id]).await?;
                job.parent = Some(id);
                out.push(job);
            }
            Child::Flow(inner) => {
                Box::pin(store(c, dialect, inner, Some(id), now, ttl, out)).await?;
            }
        }
    }
    Ok(())
}

/// The children of `parent`, in id order.
pub async fn children(c: &mut impl Conn, parent: JobId) -> Result<Vec<Job>, Error> {
    c.jobs(CHILDREN, args![parent]).await
}
