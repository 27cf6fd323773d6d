//! Storing jobs, deduplicated by idempotency key.
//!
//! A batch costs a fixed number of statements whatever its size: its keys
//! are taken in one, the jobs that hold the keys it could not take are
//! read in one, its jobs are inserted with one multi-row statement (per
//! chunk on SQLite) and the keys it took are pointed at them in one.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::backend::{Arg, Conn, args};
use crate::error::Error;
use crate::job::{Job, JobState};
use crate::new_job::NewJob;
use crate::sql::{self, Dialect, Insert};
use crate::store::Enqueued;
use sluice_store::Timestamp;

/// Stores `job`, or answers with the live job that holds its idempotency key.
pub async fn enqueue(
    c: &mut impl Conn,
    dialect: &Dialect,
    job: NewJob,
    now: Timestamp,
    ttl: Duration,
) -> Result<Enqueued, Error> {
    enqueue_batch(c, dialect, vec![job], now, ttl)
        .await?
        .pop()
        .ok_or_else(|| Error::Corrupt("an enqueue of one job answered none".to_owned()))
}

/// How one job of a batch is answered.
enum Answer {
    /// By the job inserted at this place of the insert.
    Inserted(usize),
    /// By the live job that already held its key.
    Held(Box<Job>),
    /// By the answer of the earlier job of the batch with the same key.
    SameAs(usize),
}

/// Stores every job of a batch in the caller's transaction: all of them,
/// or none if one is invalid (checked before anything is written).
///
/// Keys are taken before the jobs are inserted: on PostgreSQL a concurrent
/// enqueue with one of the batch's keys waits on the key's row until this
/// transaction ends, then finds the key live and answers with this job.
/// A key given twice in the batch stores its first job; the second is
/// answered with it, as a duplicate.
pub async fn enqueue_batch(
    c: &mut impl Conn,
    dialect: &Dialect,
    jobs: Vec<NewJob>,
    now: Timestamp,
    ttl: Duration,
) -> Result<Vec<Enqueued>, Error> {
    for job in &jobs {
        job.validate()?;
    }
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let keyed = take_keys(c, dialect, &jobs, now, ttl).await?;
    let mut held = keyed.held;
    let mut answers = Vec::with_capacity(jobs.len());
    let mut insert: Vec<&NewJob> = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let answer = match key_of(job) {
            Some(key) if keyed.first[&key] != i => Answer::SameAs(keyed.first[&key]),
            Some(key) if !keyed.taken.contains(&key) => match held.remove(&owned(key)) {
                Some(original) => Answer::Held(Box::new(original)),
                None => {
                    return Err(Error::Corrupt(format!(
                        "idempotency key {:?} points at no job",
                        key.1
                    )));
                }
            },
            _ => {
                insert.push(job);
                Answer::Inserted(insert.len() - 1)
            }
        };
        answers.push(answer);
    }
    let stored = insert_jobs(c, dialect, &insert, now).await?;
    point_keys(c, dialect, &stored).await?;

    let mut out: Vec<Enqueued> = Vec::with_capacity(answers.len());
    for answer in answers {
        let answered = match answer {
            Answer::Inserted(i) => Enqueued {
                job: stored[i].clone(),
                duplicate: false,
            },
            Answer::Held(job) => Enqueued {
                job: *job,
                duplicate: true,
            },
            Answer::SameAs(first) => Enqueued {
                job: out[first].job.clone(),
                duplicate: true,
            },
        };
        out.push(answered);
    }
    Ok(out)
}

type Key<'a> = (&'a str, &'a str);

fn owned(key: Key<'_>) -> (String, String) {
    (key.0.to_owned(), key.1.to_owned())
}

fn key_of(job: &NewJob) -> Option<Key<'_>> {
    job.idempotency_key
        .as_deref()
        .map(|key| (job.tenant.as_str(), key))
}

/// The keys of a batch after [`take_keys`].
struct Keyed<'a> {
    /// Where each key first appears in the batch.
    first: HashMap<Key<'a>, usize>,
    /// The keys this batch took: their first jobs are inserted.
    taken: HashSet<Key<'a>>,
    /// The live jobs holding the keys it could not take.
    held: HashMap<(String, String), Job>,
}

/// Takes every key of the batch that is free or expired, in one statement,
/// and reads the jobs that hold the others, in one more.
async fn take_keys<'a>(
    c: &mut impl Conn,
    dialect: &Dialect,
    jobs: &'a [NewJob],
    now: Timestamp,
    ttl: Duration,
) -> Result<Keyed<'a>, Error> {
    let mut first = HashMap::new();
    for (i, job) in jobs.iter().enumerate() {
        if let Some(key) = key_of(job) {
            first.entry(key).or_insert(i);
        }
    }
    let mut keyed = Keyed {
        first,
        taken: HashSet::new(),
        held: HashMap::new(),
    };
    if keyed.first.is_empty() {
        return Ok(keyed);
    }
    // In batch order, so that concurrent batches lock keys alike.
    let mut keys: Vec<(Key<'a>, usize)> = keyed.first.iter().map(|(k, i)| (*k, *i)).collect();
    keys.sort_unstable_by_key(|(_, i)| *i);
    let (tenants, names) = key_arrays(keys.iter().map(|(k, _)| *k));
    let taken = c
        .pairs(dialect.claim_keys, args![now + ttl, now, tenants, names])
        .await?;
    let taken: HashSet<(String, String)> = taken.into_iter().collect();
    let lookup = |k: &Key<'_>| taken.contains(&owned(*k));
    keyed.taken = keys.iter().map(|(k, _)| *k).filter(lookup).collect();
    if keyed.taken.len() < keys.len() {
        let others = keys
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !keyed.taken.contains(k));
        let (tenants, names) = key_arrays(others);
        let originals = c.jobs(dialect.keyed_jobs, args![tenants, names]).await?;
        for job in originals {
            if let Some(name) = &job.idempotency_key {
                keyed.held.insert((job.tenant.clone(), name.clone()), job);
            }
        }
    }
    Ok(keyed)
}

/// The tenants and key names of `keys`, as two arrays.
fn key_arrays<'a>(keys: impl Iterator<Item = Key<'a>>) -> (Arg, Arg) {
    let (tenants, names): (Vec<_>, Vec<_>) = keys
        .map(|(tenant, name)| (Some(tenant.to_owned()), Some(name.to_owned())))
        .unzip();
    (Arg::Texts(tenants), Arg::Texts(names))
}

/// Inserts `jobs`, answering the stored jobs in the same order.
async fn insert_jobs(
    c: &mut impl Conn,
    dialect: &Dialect,
    jobs: &[&NewJob],
    now: Timestamp,
) -> Result<Vec<Job>, Error> {
    let mut stored = Vec::with_capacity(jobs.len());
    match dialect.insert {
        Insert::Arrays(statement) => {
            if !jobs.is_empty() {
                stored = c.jobs(statement, array_args(jobs, now)).await?;
            }
        }
        Insert::Rows(max) => {
            let mut rest = jobs;
            while !rest.is_empty() {
                // A power of two: few statements, each prepared once.
                let rows = 1 << rest.len().min(max).ilog2();
                let (chunk, after) = rest.split_at(rows);
                let mut args = Vec::with_capacity(rows * sql::ROW_VALUES);
                for job in chunk {
                    let row = Row::of(job, now);
                    args.extend(args![
                        job.queue.as_str(),
                        job.kind.as_str(),
                        row.payload,
                        job.tenant.as_str(),
                        job.group.as_str(),
                        i64::from(job.priority),
                        job.idempotency_key.as_deref(),
                        i64::from(job.max_attempts),
                        row.run_at,
                        row.state,
                        row.state == JobState::Available,
                        job.traceparent.as_deref(),
                        now,
                        now,
                    ]);
                }
                stored.extend(c.jobs(sql::insert_rows(rows), args).await?);
                rest = after;
            }
        }
    }
    in_order(jobs, stored)
}

/// What an insert computes for a job.
struct Row {
    payload: String,
    run_at: Timestamp,
    state: JobState,
}

impl Row {
    fn of(job: &NewJob, now: Timestamp) -> Self {
        let run_at = job.run_at.unwrap_or(now).max(now);
        let state = if run_at > now {
            JobState::Scheduled
        } else {
            JobState::Available
        };
        Self {
            payload: job.payload.to_string(),
            run_at,
            state,
        }
    }
}

/// The arguments of an [`Insert::Arrays`]: one array per column.
fn array_args(jobs: &[&NewJob], now: Timestamp) -> Vec<Arg> {
    let n = jobs.len();
    let (mut queue, mut kind, mut payload, mut tenant, mut group) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut priority, mut key, mut max_attempts, mut run_at, mut state, mut due) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut trace = Vec::with_capacity(n);
    for job in jobs {
        let row = Row::of(job, now);
        queue.push(Some(job.queue.clone()));
        kind.push(Some(job.kind.clone()));
        payload.push(Some(row.payload));
        tenant.push(Some(job.tenant.clone()));
        group.push(Some(job.group.clone()));
        priority.push(Some(i64::from(job.priority)));
        key.push(job.idempotency_key.clone());
        max_attempts.push(Some(i64::from(job.max_attempts)));
        run_at.push(Some(row.run_at.as_millis()));
        state.push(Some(row.state.as_str().to_owned()));
        due.push(row.state == JobState::Available);
        trace.push(job.traceparent.clone());
    }
    vec![
        Arg::from(now),
        Arg::Texts(queue),
        Arg::Texts(kind),
        Arg::Texts(payload),
        Arg::Texts(tenant),
        Arg::Texts(group),
        Arg::Ints(priority),
        Arg::Texts(key),
        Arg::Ints(max_attempts),
        Arg::Ints(run_at),
        Arg::Texts(state),
        Arg::Bools(due),
        Arg::Texts(trace),
    ]
}

/// `stored` in the order of `jobs`. The database numbers rows in the order
/// it inserts them, which is the order given, but `RETURNING` promises no
/// order: sorted by id, each stored job must then match its own.
fn in_order(jobs: &[&NewJob], mut stored: Vec<Job>) -> Result<Vec<Job>, Error> {
    stored.sort_unstable_by_key(|job| job.id);
    let matches = stored.len() == jobs.len()
        && stored.iter().zip(jobs).all(|(s, j)| {
            s.queue == j.queue
                && s.kind == j.kind
                && s.tenant == j.tenant
                && s.group == j.group
                && s.idempotency_key == j.idempotency_key
        });
    if matches {
        Ok(stored)
    } else {
        Err(Error::Corrupt(format!(
            "an insert of {} jobs answered {} that do not match them in id order",
            jobs.len(),
            stored.len()
        )))
    }
}

/// Points the keys of the jobs just stored at them, in one statement.
async fn point_keys(c: &mut impl Conn, dialect: &Dialect, stored: &[Job]) -> Result<(), Error> {
    let keyed: Vec<&Job> = stored
        .iter()
        .filter(|j| j.idempotency_key.is_some())
        .collect();
    if keyed.is_empty() {
        return Ok(());
    }
    let tenants = keyed.iter().map(|j| Some(j.tenant.clone())).collect();
    let names = keyed.iter().map(|j| j.idempotency_key.clone()).collect();
    let ids = keyed.iter().map(|j| Some(j.id.0)).collect();
    c.execute(
        dialect.set_key_jobs,
        vec![Arg::Texts(tenants), Arg::Texts(names), Arg::Ints(ids)],
    )
    .await?;
    Ok(())
}
