//! Storing jobs, deduplicated by idempotency key.

use std::time::Duration;

use crate::backend::{Conn, args};
use crate::clock::Timestamp;
use crate::error::Error;
use crate::job::JobState;
use crate::new_job::NewJob;
use crate::sql;
use crate::store::Enqueued;

/// Stores `job`, or answers with the live job that holds its idempotency key.
///
/// The key is taken before the job is inserted: on PostgreSQL a concurrent
/// enqueue with the same key waits on the key's row until this transaction
/// ends, then finds the key live and answers with this job.
pub async fn enqueue(
    c: &mut impl Conn,
    job: NewJob,
    now: Timestamp,
    ttl: Duration,
) -> Result<Enqueued, Error> {
    job.validate()?;
    if let Some(key) = job.idempotency_key.as_deref() {
        let taken = c
            .ints(
                sql::CLAIM_KEY,
                args![job.tenant.as_str(), key, now + ttl, now],
            )
            .await?;
        if taken.is_empty() {
            let original = c
                .jobs(sql::JOB_BY_KEY, args![job.tenant.as_str(), key])
                .await?;
            return match original.into_iter().next() {
                Some(job) => Ok(Enqueued {
                    job,
                    duplicate: true,
                }),
                None => Err(Error::Corrupt(format!(
                    "idempotency key {key:?} points at no job"
                ))),
            };
        }
    }
    let run_at = job.run_at.unwrap_or(now).max(now);
    let state = if run_at > now {
        JobState::Scheduled
    } else {
        JobState::Available
    };
    let payload = job.payload.to_string();
    let inserted = c
        .jobs(
            sql::INSERT_JOB,
            args![
                job.queue.as_str(),
                job.kind.as_str(),
                payload,
                job.tenant.as_str(),
                job.group.as_str(),
                i64::from(job.priority),
                job.idempotency_key.as_deref(),
                i64::from(job.max_attempts),
                run_at,
                state,
                now,
                state == JobState::Available,
            ],
        )
        .await?;
    let stored = inserted
        .into_iter()
        .next()
        .ok_or_else(|| Error::Corrupt("insert returned no row".to_owned()))?;
    if let Some(key) = job.idempotency_key.as_deref() {
        c.execute(sql::SET_KEY_JOB, args![job.tenant.as_str(), key, stored.id])
            .await?;
    }
    Ok(Enqueued {
        job: stored,
        duplicate: false,
    })
}

/// Stores every job of a batch in the caller's transaction, validating each
/// just before storing it, so that a bad job fails the batch after earlier
/// ones were written: the rollback, not the validation, keeps it atomic.
pub async fn enqueue_batch(
    c: &mut impl Conn,
    jobs: Vec<NewJob>,
    now: Timestamp,
    ttl: Duration,
) -> Result<Vec<Enqueued>, Error> {
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        out.push(enqueue(c, job, now, ttl).await?);
    }
    Ok(out)
}
