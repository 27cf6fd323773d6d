//! Reading jobs and the operator's calls: retry, cancel, purge, pause,
//! counts and retention.

use std::collections::BTreeMap;

use crate::backend::{Conn, args};
use crate::counts::{QueueCounts, StateCounts};
use crate::error::Error;
use crate::job::{Job, JobId, JobState};
use crate::new_job::check_name;
use crate::retention::{Cleaned, Retention};
use crate::sql;
use crate::store::{ListFilter, MAX_PAGE, Page};
use sluice_store::Timestamp;

/// The job with this id.
pub async fn get(c: &mut impl Conn, id: JobId) -> Result<Option<Job>, Error> {
    Ok(c.jobs(sql::GET, args![id]).await?.into_iter().next())
}

/// One page of jobs.
pub async fn list(c: &mut impl Conn, filter: &ListFilter) -> Result<Page, Error> {
    let limit = filter.limit.clamp(1, MAX_PAGE);
    let after = filter.after.map_or(i64::MIN, |id| id.0);
    let sql = match filter.tenant {
        Some(_) => sql::LIST_TENANT,
        None => sql::LIST,
    };
    let jobs = c
        .summaries(
            sql,
            args![
                filter.queue.as_deref(),
                filter.state.map(JobState::as_str),
                after,
                i64::from(limit),
                filter.tenant.as_deref()
            ],
        )
        .await?;
    let full = jobs.len() == limit as usize;
    let next = if full {
        jobs.last().map(|job| job.id)
    } else {
        None
    };
    Ok(Page { jobs, next })
}

/// Makes a dead job available again.
pub async fn retry(c: &mut impl Conn, id: JobId, now: Timestamp) -> Result<Job, Error> {
    let jobs = c.jobs(sql::RETRY, args![id, now]).await?;
    super::one(c, jobs, id, "retry").await
}

/// Makes every dead job of `queue` available again.
pub async fn retry_dead(c: &mut impl Conn, queue: &str, now: Timestamp) -> Result<u64, Error> {
    c.execute(sql::RETRY_DEAD, args![queue, now]).await
}

/// Cancels a job that has not finished.
pub async fn cancel(c: &mut impl Conn, id: JobId, now: Timestamp) -> Result<Job, Error> {
    let jobs = c.jobs(sql::CANCEL, args![id, now]).await?;
    super::one(c, jobs, id, "cancel").await
}

/// Deletes dead jobs.
pub async fn purge_dead(c: &mut impl Conn, queue: Option<&str>) -> Result<u64, Error> {
    c.execute(sql::PURGE_DEAD, args![queue]).await
}

/// Pauses or resumes claims from `queue`.
pub async fn set_paused(
    c: &mut impl Conn,
    queue: &str,
    paused: bool,
    now: Timestamp,
) -> Result<(), Error> {
    check_name("queue", queue)?;
    c.execute(sql::SET_PAUSED, args![queue, paused, now])
        .await?;
    Ok(())
}

/// Jobs by queue and state, with every paused queue even if empty (a
/// state may come in more than one row, see [`sql::COUNTS`]).
pub async fn counts(c: &mut impl Conn) -> Result<Vec<QueueCounts>, Error> {
    let mut queues: BTreeMap<String, QueueCounts> = BTreeMap::new();
    for (queue, state, n) in c.counts(sql::COUNTS, args![]).await? {
        let state: JobState = state.parse().map_err(|e| Error::Corrupt(format!("{e}")))?;
        let n = u64::try_from(n).map_err(|e| Error::Corrupt(e.to_string()))?;
        entry(&mut queues, queue).counts.add(state, n);
    }
    for queue in c.texts(sql::PAUSED, args![]).await? {
        entry(&mut queues, queue).paused = true;
    }
    Ok(queues.into_values().collect())
}

fn entry(queues: &mut BTreeMap<String, QueueCounts>, name: String) -> &mut QueueCounts {
    queues.entry(name.clone()).or_insert_with(|| QueueCounts {
        queue: name,
        paused: false,
        counts: StateCounts::default(),
    })
}

/// Deletes what `retention` no longer keeps.
pub async fn cleanup(
    c: &mut impl Conn,
    retention: &Retention,
    now: Timestamp,
) -> Result<Cleaned, Error> {
    let completed = expire(c, JobState::Completed, now - retention.completed, now).await?;
    let dead = expire(c, JobState::Dead, now - retention.dead, now).await?;
    let cancelled = expire(c, JobState::Cancelled, now - retention.cancelled, now).await?;
    let expired_keys = c.execute(sql::EXPIRE_KEYS, args![now]).await?;
    c.execute(sql::FORGET_GROUPS, args![]).await?;
    c.execute(sql::FORGET_TENANTS, args![]).await?;
    let events = super::events::expire(c, now - retention.events).await?;
    Ok(Cleaned {
        completed,
        dead,
        cancelled,
        expired_keys,
        events,
    })
}

/// Deletes the jobs in `state` that finished by `before`.
async fn expire(
    c: &mut impl Conn,
    state: JobState,
    before: Timestamp,
    now: Timestamp,
) -> Result<u64, Error> {
    c.execute(sql::EXPIRE_JOBS, args![state, before, now]).await
}
