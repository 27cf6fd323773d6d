//! Claiming due jobs: turns across groups, priority within a group.

use std::collections::HashMap;
use std::time::Duration;

use crate::backend::{Conn, args};
use crate::clock::Timestamp;
use crate::error::Error;
use crate::job::Job;
use crate::new_job::{check_name, invalid};
use crate::sql::{self, Dialect};

/// The most jobs one claim hands out.
pub const MAX_CLAIM: u32 = 1_000;

/// Leases up to `n` due jobs of `queue` to `worker` until `now + lease`.
pub async fn claim(
    c: &mut impl Conn,
    dialect: &Dialect,
    queue: &str,
    worker: &str,
    n: u32,
    lease: Duration,
    now: Timestamp,
) -> Result<Vec<Job>, Error> {
    check_name("queue", queue)?;
    check_name("worker", worker)?;
    if lease.is_zero() {
        return Err(invalid("lease", "must be longer than zero"));
    }
    let n = n.min(MAX_CLAIM);
    if n == 0 || !c.texts(sql::IS_PAUSED, args![queue]).await?.is_empty() {
        return Ok(Vec::new());
    }
    let picked = c
        .ints(dialect.pick, args![queue, now, i64::from(n)])
        .await?;
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(&picked).map_err(|e| Error::Corrupt(e.to_string()))?;
    let mut jobs = c
        .jobs(dialect.take, args![worker, now + lease, now, ids])
        .await?;
    // RETURNING gives no order: restore the claim order that `pick` chose.
    let rank: HashMap<i64, usize> = picked.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    jobs.sort_by_key(|job| rank.get(&job.id.0).copied().unwrap_or(usize::MAX));
    rotate(c, queue, &jobs).await?;
    Ok(jobs)
}

/// Moves the groups just served behind every other group of the queue, in
/// the order they were served, so that the next claim starts with the
/// group that waited longest.
async fn rotate(c: &mut impl Conn, queue: &str, jobs: &[Job]) -> Result<(), Error> {
    let mut served: Vec<&str> = Vec::new();
    for job in jobs {
        if !served.contains(&job.group.as_str()) {
            served.push(&job.group);
        }
    }
    let last = c
        .ints(sql::LAST_SERVED, args![queue])
        .await?
        .first()
        .copied()
        .unwrap_or(0);
    let mut tickets: Vec<(&str, i64)> = served
        .into_iter()
        .zip(1..)
        .map(|(group, i)| (group, last + i))
        .collect();
    // Concurrent claimers (PostgreSQL) lock group rows in one order, by
    // name, so that they cannot deadlock on them.
    tickets.sort_unstable();
    for (group, ticket) in tickets {
        c.execute(sql::SERVE, args![queue, group, ticket]).await?;
    }
    Ok(())
}
