//! Claiming due jobs: turns across tenants, then across a tenant's groups,
//! priority within a group.

use std::collections::HashSet;
use std::time::Duration;

use crate::backend::{Arg, Conn, args};
use crate::error::Error;
use crate::job::Job;
use crate::new_job::{check_name, invalid};
use crate::sql::Dialect;
use sluice_store::Timestamp;

/// The most jobs one claim hands out.
pub const MAX_CLAIM: u32 = 1_000;

/// The most jobs one claim marks due (their `run_at` passed since they
/// were stored). Bounds the claim after a mass of scheduled jobs comes due
/// at once: the earliest go first, the rest with the next claims.
pub(crate) const MAX_PROMOTE: i64 = 10_000;

/// Leases up to `n` due jobs of `queue` to `worker` until `now + lease`,
/// in three statements whatever `n` and however many groups it serves:
/// the promotion, the claim itself, and the rotation (two on SQLite, one
/// per table).
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
    if n == 0 {
        return Ok(Vec::new());
    }
    // The claim walks only jobs marked due: mark those whose time came.
    c.execute(dialect.promote, args![queue, now, MAX_PROMOTE])
        .await?;
    let claimed = c
        .claimed(
            dialect.claim,
            args![queue, now, i64::from(n), worker, now + lease],
        )
        .await?;
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    let jobs = claim_order(claimed);
    rotate(c, dialect, queue, &jobs).await?;
    Ok(jobs)
}

/// The claimed jobs in the order the claim chose them (`RETURNING` keeps
/// none), rebuilt from each job's group and tenant turns as
/// [`Dialect::claim`] ranks them: a job's place in its group (highest
/// priority, then earliest `run_at`, then id first) is `rn`; within a
/// tenant, jobs go by `rn`, then the group served longest ago, then
/// priority, `run_at` and id, which gives each its tenant rank `tr`;
/// overall by `tr`, then the tenant served longest ago, then priority,
/// `run_at` and id. The claim took a prefix of each group and of each
/// tenant's ranking, so the ranks among the jobs taken are the ranks it
/// computed.
///
/// Jobs of one tenant's one group (a queue without tenants or groups) take
/// one sort: their group rank is their rank overall.
fn claim_order(claimed: Vec<(Job, i64, i64)>) -> Vec<Job> {
    let within = |j: &Job| (std::cmp::Reverse(j.priority), j.run_at, j.id);
    let one_group = claimed
        .windows(2)
        .all(|w| w[0].0.tenant == w[1].0.tenant && w[0].0.group == w[1].0.group);
    if one_group {
        let mut jobs: Vec<Job> = claimed.into_iter().map(|(job, _, _)| job).collect();
        jobs.sort_by_key(within);
        return jobs;
    }
    ranked_order(claimed)
}

/// [`claim_order`] of jobs of several groups.
fn ranked_order(claimed: Vec<(Job, i64, i64)>) -> Vec<Job> {
    struct Ranked {
        job: Job,
        group_served: i64,
        tenant_served: i64,
        rn: usize,
        tr: usize,
    }
    let within = |j: &Job| (std::cmp::Reverse(j.priority), j.run_at, j.id);
    let mut all: Vec<Ranked> = claimed
        .into_iter()
        .map(|(job, group_served, tenant_served)| Ranked {
            job,
            group_served,
            tenant_served,
            rn: 0,
            tr: 0,
        })
        .collect();
    all.sort_by(|a, b| {
        (&a.job.tenant, &a.job.group, within(&a.job)).cmp(&(
            &b.job.tenant,
            &b.job.group,
            within(&b.job),
        ))
    });
    for i in 0..all.len() {
        let same = i > 0
            && all[i - 1].job.tenant == all[i].job.tenant
            && all[i - 1].job.group == all[i].job.group;
        all[i].rn = if same { all[i - 1].rn + 1 } else { 1 };
    }
    all.sort_by(|a, b| {
        (&a.job.tenant, a.rn, a.group_served, within(&a.job)).cmp(&(
            &b.job.tenant,
            b.rn,
            b.group_served,
            within(&b.job),
        ))
    });
    for i in 0..all.len() {
        let same = i > 0 && all[i - 1].job.tenant == all[i].job.tenant;
        all[i].tr = if same { all[i - 1].tr + 1 } else { 1 };
    }
    all.sort_by(|a, b| {
        (a.tr, a.tenant_served, within(&a.job)).cmp(&(b.tr, b.tenant_served, within(&b.job)))
    });
    all.into_iter().map(|r| r.job).collect()
}

/// Moves the tenants and groups just served behind every other of the
/// queue, in the order they were served, so that the next claim starts
/// with the tenant, and within it the group, that waited longest.
async fn rotate(
    c: &mut impl Conn,
    dialect: &Dialect,
    queue: &str,
    jobs: &[Job],
) -> Result<(), Error> {
    let mut tenants: Vec<&str> = Vec::new();
    let mut groups: Vec<(&str, &str)> = Vec::new();
    let mut seen = HashSet::new();
    for job in jobs {
        let group = (job.tenant.as_str(), job.group.as_str());
        if seen.insert((group.0, None)) {
            tenants.push(group.0);
        }
        if seen.insert((group.0, Some(group.1))) {
            groups.push(group);
        }
    }
    // Concurrent claimers (PostgreSQL) lock these rows in one order,
    // tenants then groups, each by name, so that they cannot deadlock.
    let (names, tenant_turns): (Vec<_>, Vec<_>) = turns(tenants)
        .into_iter()
        .map(|(tenant, turn)| (Some(tenant.to_owned()), Some(turn)))
        .unzip();
    c.execute(
        dialect.serve_tenants,
        vec![Arg::from(queue), Arg::Texts(names), Arg::Ints(tenant_turns)],
    )
    .await?;
    let mut owners = Vec::with_capacity(groups.len());
    let mut names = Vec::with_capacity(groups.len());
    let mut group_turns = Vec::with_capacity(groups.len());
    for ((tenant, group), turn) in turns(groups) {
        owners.push(Some(tenant.to_owned()));
        names.push(Some(group.to_owned()));
        group_turns.push(Some(turn));
    }
    c.execute(
        dialect.serve_groups,
        vec![
            Arg::from(queue),
            Arg::Texts(owners),
            Arg::Texts(names),
            Arg::Ints(group_turns),
        ],
    )
    .await?;
    Ok(())
}

/// What was `served`, each with its turn (1 for the first served), sorted
/// by name.
fn turns<T: Ord>(served: Vec<T>) -> Vec<(T, i64)> {
    let mut turns: Vec<(T, i64)> = served.into_iter().zip(1..).collect();
    turns.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobId, JobState, JobSummary};

    fn job(id: i64, tenant: &str, group: &str, priority: i32, run_at: i64) -> Job {
        let summary = JobSummary {
            id: JobId(id),
            queue: "q".to_owned(),
            kind: "k".to_owned(),
            tenant: tenant.to_owned(),
            group: group.to_owned(),
            priority,
            idempotency_key: None,
            attempts: 0,
            max_attempts: 1,
            reschedules: 0,
            run_at: Timestamp::from_millis(run_at),
            state: JobState::Running,
            last_error: None,
            lease: None,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            finished_at: None,
        };
        Job::from_summary(summary, serde_json::Value::Null, None, None)
    }

    fn ids(jobs: &[Job]) -> Vec<i64> {
        jobs.iter().map(|j| j.id.0).collect()
    }

    #[test]
    fn one_groups_jobs_are_ordered_as_the_ranking_orders_them() {
        // Priorities, times and ids in no order: highest priority, then
        // earliest, then lowest id first.
        let claimed: Vec<(Job, i64, i64)> = [
            (5, 0, 30),
            (2, 1, 30),
            (9, 0, 10),
            (1, 0, 30),
            (7, 1, 20),
            (3, -1, 0),
        ]
        .into_iter()
        .map(|(id, p, at)| (job(id, "t", "g", p, at), 4, 2))
        .collect();
        let fast = claim_order(claimed.clone());
        assert_eq!(ids(&fast), [7, 2, 9, 1, 5, 3]);
        assert_eq!(ids(&fast), ids(&ranked_order(claimed)));
    }

    #[test]
    fn groups_and_tenants_still_take_turns() {
        // Tenant a (served at 1, before b at 2) has groups x (served 5)
        // and y (served 3): y's first job, then b's, then x's…
        let claimed = vec![
            (job(1, "a", "x", 0, 0), 5, 1),
            (job(2, "a", "x", 0, 1), 5, 1),
            (job(3, "a", "y", 0, 2), 3, 1),
            (job(4, "b", "z", 0, 3), 1, 2),
        ];
        assert_eq!(ids(&claim_order(claimed)), [3, 4, 1, 2]);
    }
}
