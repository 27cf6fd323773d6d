//! Calls on a leased job (heartbeat, complete, fail) and the rescue of
//! jobs whose lease expired.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use crate::backend::{Arg, Conn, args};
use crate::error::Error;
use crate::job::{Job, JobId, JobState, Lease};
use crate::new_job::invalid;
use crate::sql::{self, Dialect};
use crate::store::RetryDecision;
use sluice_store::Timestamp;

/// The longest error text kept on a job; longer ones are cut.
pub const MAX_ERROR_LEN: usize = 4_096;

/// Extends `lease` to `now + extend`.
/// The longest progress a run may report, as JSON text.
pub const MAX_PROGRESS_LEN: usize = 16 * 1024;

/// Records what a leased job's run reports of its progress.
pub async fn progress(
    c: &mut impl Conn,
    lease: &Lease,
    progress: &serde_json::Value,
    now: Timestamp,
) -> Result<Job, Error> {
    let text = progress.to_string();
    if text.len() > MAX_PROGRESS_LEN {
        return Err(invalid("progress", "is longer than 16 KiB as JSON"));
    }
    let jobs = c
        .jobs(sql::PROGRESS, guard(lease, args![text, now]))
        .await?;
    held(c, jobs, lease).await
}

pub async fn heartbeat(
    c: &mut impl Conn,
    lease: &Lease,
    extend: Duration,
    now: Timestamp,
) -> Result<Lease, Error> {
    if extend.is_zero() {
        return Err(invalid("lease", "must be longer than zero"));
    }
    let jobs = c
        .jobs(sql::HEARTBEAT, guard(lease, args![now + extend, now]))
        .await?;
    let job = held(c, jobs, lease).await?;
    job.lease
        .ok_or_else(|| Error::Corrupt(format!("job {} is running without a lease", job.id)))
}

/// Extends every lease of `leases` that still holds to `now + extend`
/// with one statement: answers one result per lease, in order.
pub async fn heartbeat_many(
    c: &mut impl Conn,
    dialect: &Dialect,
    leases: &[Lease],
    extend: Duration,
    now: Timestamp,
) -> Result<Vec<Result<Lease, Error>>, Error> {
    if extend.is_zero() {
        return Err(invalid("lease", "must be longer than zero"));
    }
    let ids = leases.iter().map(|l| Some(l.job.0)).collect();
    let owners = leases.iter().map(|l| Some(l.owner.clone())).collect();
    let tokens = leases.iter().map(|l| Some(l.token)).collect();
    let renewed: HashMap<JobId, Job> = c
        .jobs(
            dialect.heartbeat_many,
            vec![
                Arg::from(now + extend),
                Arg::from(now),
                Arg::Ints(ids),
                Arg::Texts(owners),
                Arg::Ints(tokens),
            ],
        )
        .await?
        .into_iter()
        .map(|job| (job.id, job))
        .collect();
    let mut out = Vec::with_capacity(leases.len());
    for lease in leases {
        out.push(
            match renewed.get(&lease.job).and_then(|j| j.lease.clone()) {
                // The same job may be given twice with different tokens: only
                // the one that holds it was renewed.
                Some(held) if held.token == lease.token && held.owner == lease.owner => Ok(held),
                _ => Err(not_held(c, lease).await),
            },
        );
    }
    Ok(out)
}

/// Marks the leased job completed with `result`.
pub async fn complete(
    c: &mut impl Conn,
    lease: &Lease,
    result: &Value,
    now: Timestamp,
) -> Result<Job, Error> {
    let jobs = c
        .jobs(sql::COMPLETE, guard(lease, args![result.to_string(), now]))
        .await?;
    held(c, jobs, lease).await
}

/// Completes many leased jobs with one statement: answers one result per
/// item, in order. A lease that no longer holds fails only its item; a
/// job given twice is completed by its first item.
pub async fn complete_many(
    c: &mut impl Conn,
    dialect: &Dialect,
    done: &[(Lease, Value)],
    now: Timestamp,
) -> Result<Vec<Result<Job, Error>>, Error> {
    let completed = c
        .jobs(dialect.complete_many, args![now, completions(done)])
        .await?
        .into_iter()
        .map(|job| (job.id, job))
        .collect();
    answers(c, done, completed).await
}

/// [`complete_many`] answering only the id of each job completed, read
/// back alone ([`Dialect::complete_ids`]).
pub async fn complete_ids(
    c: &mut impl Conn,
    dialect: &Dialect,
    done: &[(Lease, Value)],
    now: Timestamp,
) -> Result<Vec<Result<JobId, Error>>, Error> {
    let completed = c
        .ints(dialect.complete_ids, args![now, completions(done)])
        .await?
        .into_iter()
        .map(|id| (JobId(id), JobId(id)))
        .collect();
    answers(c, done, completed).await
}

/// The JSON array of a batch of completions (see
/// [`Dialect::complete_many`]), each job once: its first item.
///
/// Written out directly rather than built as a [`Value`] and serialized:
/// a map, three strings and a number a job, once a job, was a noticeable
/// share of the batcher's work.
fn completions(done: &[(Lease, Value)]) -> String {
    use std::io::Write as _;
    let mut seen = HashSet::with_capacity(done.len());
    let mut out: Vec<u8> = Vec::with_capacity(2 + done.len() * 96);
    out.push(b'[');
    for (lease, result) in done {
        if !seen.insert(lease.job) {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        // Writing to a `Vec` cannot fail, nor serializing a `str`.
        let _ = write!(out, "{{\"id\":{},\"owner\":", lease.job.0);
        let _ = serde_json::to_writer(&mut out, &lease.owner);
        let _ = write!(out, ",\"token\":{},\"result\":", lease.token);
        let _ = serde_json::to_writer(&mut out, &result.to_string());
        out.push(b'}');
    }
    out.push(b']');
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// One answer per item of `done`, in order, from what the batch
/// `completed` (by job id).
async fn answers<T: Send>(
    c: &mut impl Conn,
    done: &[(Lease, Value)],
    mut completed: HashMap<JobId, T>,
) -> Result<Vec<Result<T, Error>>, Error> {
    let mut out = Vec::with_capacity(done.len());
    for (lease, _) in done {
        // `remove`: a repeated item finds its job taken and is refused.
        out.push(match completed.remove(&lease.job) {
            Some(job) => Ok(job),
            None => Err(not_held(c, lease).await),
        });
    }
    Ok(out)
}

/// Records a failed run of the leased job.
pub async fn fail(
    c: &mut impl Conn,
    lease: &Lease,
    error: &str,
    decision: RetryDecision,
    now: Timestamp,
) -> Result<Job, Error> {
    let (attempt, reschedule, dead, state, run_at) = match decision {
        RetryDecision::RetryAt(t) => (1_i64, 0_i64, false, JobState::Retryable, t),
        RetryDecision::RescheduleAt(t) => (0, 1, false, JobState::Scheduled, t),
        RetryDecision::Dead => (1, 0, true, JobState::Dead, now),
    };
    let tail = args![
        attempt,
        reschedule,
        dead,
        state,
        run_at,
        truncate(error),
        now
    ];
    let jobs = c.jobs(sql::FAIL, guard(lease, tail)).await?;
    held(c, jobs, lease).await
}

/// Records many failed runs, one guarded statement each: answers one
/// result per item, in order. A lease that no longer holds (or a job
/// given twice, whose first item ended the lease) fails only its item.
pub async fn fail_many(
    c: &mut impl Conn,
    failed: &[(Lease, String, RetryDecision)],
    now: Timestamp,
) -> Result<Vec<Result<Job, Error>>, Error> {
    let mut out = Vec::with_capacity(failed.len());
    for (lease, error, decision) in failed {
        out.push(match fail(c, lease, error, *decision, now).await {
            Err(Error::Database(e)) => return Err(Error::Database(e)),
            answer => answer,
        });
    }
    Ok(out)
}

/// Takes back every running job whose lease expired by `now`.
pub async fn rescue(c: &mut impl Conn, now: Timestamp) -> Result<Vec<Job>, Error> {
    let mut jobs = c.jobs(sql::RESCUE, args![now]).await?;
    jobs.sort_by_key(|job| job.id);
    Ok(jobs)
}

/// The arguments of the lease guard (`$1` to `$3`) followed by `rest`.
fn guard(lease: &Lease, rest: Vec<crate::backend::Arg>) -> Vec<crate::backend::Arg> {
    let mut all = args![lease.job, lease.owner.as_str(), lease.token];
    all.extend(rest);
    all
}

/// The job a guarded call returned, or why the lease no longer holds.
async fn held(c: &mut impl Conn, jobs: Vec<Job>, lease: &Lease) -> Result<Job, Error> {
    match jobs.into_iter().next() {
        Some(job) => Ok(job),
        None => Err(not_held(c, lease).await),
    }
}

/// Why a guarded call on `lease` changed nothing: the job is gone, or the
/// lease no longer holds.
async fn not_held(c: &mut impl Conn, lease: &Lease) -> Error {
    match c.jobs(sql::GET, args![lease.job]).await {
        Ok(found) if found.is_empty() => Error::NotFound(lease.job),
        Ok(_) => Error::LeaseLost(lease.job),
        Err(e) => e,
    }
}

/// `error` cut to at most [`MAX_ERROR_LEN`] bytes on a character
/// boundary, with NUL characters (which PostgreSQL's `TEXT` refuses, and
/// an upstream's error body may hold) written as U+FFFD: one job's error
/// text must never fail the batch it is written in.
fn truncate(error: &str) -> String {
    let error = error.replace('\0', "\u{FFFD}");
    let mut end = error.len().min(MAX_ERROR_LEN);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_errors_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_ERROR_LEN);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_ERROR_LEN && cut.chars().all(|c| c == 'é'));
        assert_eq!(truncate("short"), "short");
    }

    #[test]
    fn a_batch_of_completions_is_the_json_it_was_built_as_before() {
        let lease = |job, owner: &str, token| Lease {
            job: JobId(job),
            owner: owner.to_owned(),
            token,
            expires_at: Timestamp::from_millis(0),
        };
        let done = [
            (
                lease(7, "w\"1\\\u{1}é", 3),
                serde_json::json!({"a": [1, "x\"y"]}),
            ),
            (lease(-2, "", i64::MIN), Value::Null),
            // A job given twice: its first item only.
            (lease(7, "other", 4), serde_json::json!(1)),
            (lease(i64::MAX, "w", 1), serde_json::json!("é\n")),
        ];
        let expected: Vec<Value> = [&done[0], &done[1], &done[3]]
            .iter()
            .map(|(l, r)| {
                serde_json::json!({"id": l.job.0, "owner": l.owner, "token": l.token, "result": r.to_string()})
            })
            .collect();
        let written: Value = serde_json::from_str(&completions(&done)).unwrap();
        assert_eq!(written, Value::Array(expected));
        assert_eq!(completions(&[]), "[]");
    }

    #[test]
    fn nul_characters_are_replaced() {
        assert_eq!(truncate("a\0b"), "a\u{FFFD}b");
    }
}
