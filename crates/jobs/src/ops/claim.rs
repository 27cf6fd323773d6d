//! Claiming due jobs: turns across tenants, then across a tenant's groups,
//! priority within a group.

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

/// The most jobs one claim marks due (their `run_at` passed since they
/// were stored). Bounds the claim after a mass of scheduled jobs comes due
/// at once: the earliest go first, the rest with the next claims.
pub(crate) const MAX_PROMOTE: i64 = 10_000;

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
    // The pick walks only jobs marked due: mark those whose time came.
    c.execute(dialect.promote, args![queue, now, MAX_PROMOTE])
        .await?;
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

/// Moves the tenants and groups just served behind every other of the
/// queue, in the order they were served, so that the next claim starts
/// with the tenant, and within it the group, that waited longest.
async fn rotate(c: &mut impl Conn, queue: &str, jobs: &[Job]) -> Result<(), Error> {
    let mut tenants: Vec<&str> = Vec::new();
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for job in jobs {
        let group = (job.tenant.as_str(), job.group.as_str());
        if !tenants.contains(&group.0) {
            tenants.push(group.0);
        }
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    // Concurrent claimers (PostgreSQL) lock these rows in one order,
    // tenants then groups, each by name, so that they cannot deadlock.
    let last = last_served(c, sql::LAST_SERVED_TENANT, queue).await?;
    for (tenant, ticket) in tickets(tenants, last) {
        c.execute(sql::SERVE_TENANT, args![queue, tenant, ticket])
            .await?;
    }
    let last = last_served(c, sql::LAST_SERVED_GROUP, queue).await?;
    for ((tenant, group), ticket) in tickets(groups, last) {
        c.execute(sql::SERVE_GROUP, args![queue, tenant, group, ticket])
            .await?;
    }
    Ok(())
}

async fn last_served(c: &mut impl Conn, sql: &'static str, queue: &str) -> Result<i64, Error> {
    Ok(c.ints(sql, args![queue])
        .await?
        .first()
        .copied()
        .unwrap_or(0))
}

/// The turns after `last` of what was `served`, in serving order, sorted
/// by name.
fn tickets<T: Ord>(served: Vec<T>, last: i64) -> Vec<(T, i64)> {
    let mut tickets: Vec<(T, i64)> = served.into_iter().zip(last + 1..).collect();
    tickets.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    tickets
}
