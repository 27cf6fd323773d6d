//! Storing, listing, deleting and firing schedules (see [`crate::schedule`]).

use std::time::Duration;

use sluice_store::{Columns, Timestamp};

use crate::backend::{Conn, args};
use crate::error::Error;
use crate::job::Job;
use crate::schedule::{Cadence, MAX_PER_TENANT, NewSchedule, Schedule, Template};
use crate::sql::Dialect;

const PUT: &str = "INSERT INTO schedules (tenant, name, every_ms, cron, tz, job, start_at, end_at, \
     run_limit, runs, next_run, last_run, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, NULL, $11, $11) \
     ON CONFLICT (tenant, name) DO UPDATE SET every_ms = excluded.every_ms, cron = excluded.cron, \
     tz = excluded.tz, job = excluded.job, start_at = excluded.start_at, end_at = excluded.end_at, \
     run_limit = excluded.run_limit, runs = 0, next_run = excluded.next_run, last_run = NULL, \
     created_at = excluded.created_at, updated_at = excluded.updated_at";
const COUNT_OTHERS: &str = "SELECT COUNT(*) FROM schedules WHERE tenant = $1 AND name <> $2";
const EXISTS: &str = "SELECT COUNT(*) FROM schedules WHERE tenant = $1 AND name = $2";
const GET: &str = "SELECT * FROM schedules WHERE tenant = $1 AND name = $2";
const LIST_TENANT: &str = "SELECT * FROM schedules WHERE tenant = $1 ORDER BY name LIMIT $2";
const LIST_ALL: &str = "SELECT * FROM schedules ORDER BY tenant, name LIMIT $1";
const DELETE: &str = "DELETE FROM schedules WHERE tenant = $1 AND name = $2";
/// Due schedules in the order every replica takes them, so that two
/// replicas firing at once lock their rows in the same order.
const DUE: &str = "SELECT * FROM schedules WHERE next_run IS NOT NULL AND next_run <= $1 \
     ORDER BY next_run, tenant, name LIMIT $2";
/// Moves a schedule past the tick it held: the one replica whose update
/// finds the tick still there fires it. On PostgreSQL a second replica's
/// update waits for the first one's row lock, then finds `next_run`
/// moved and changes nothing.
const ADVANCE: &str = "UPDATE schedules SET next_run = $3, runs = runs + 1, last_run = $4, \
     updated_at = $5 WHERE tenant = $1 AND name = $2 AND next_run = $4";
const MARK_JOB: &str = "UPDATE jobs SET schedule = $2, schedule_tick = $3 WHERE id = $1";

/// How many schedules [`list`] returns at most.
pub const MAX_LIST: u64 = MAX_PER_TENANT;

/// Stores `s`, replacing the tenant's schedule of that name: its runs start
/// again from 0 and its next tick is computed afresh. Answers the stored
/// schedule and whether it replaced one.
pub async fn put(
    c: &mut impl Conn,
    s: &NewSchedule,
    now: Timestamp,
) -> Result<(Schedule, bool), Error> {
    s.validate()?;
    let others = first(
        c.ints(COUNT_OTHERS, args![s.tenant.as_str(), s.name.as_str()])
            .await?,
    );
    if others >= MAX_PER_TENANT as i64 {
        return Err(crate::new_job::invalid(
            "name",
            "the tenant holds 1000 schedules already (the most); delete one first",
        ));
    }
    let existed = first(
        c.ints(EXISTS, args![s.tenant.as_str(), s.name.as_str()])
            .await?,
    ) > 0;
    let start = s.start_at.unwrap_or(now);
    let next = s
        .cadence
        .at_or_after(start, start)
        .filter(|t| s.end_at.is_none_or(|end| *t <= end));
    let every_ms = s.cadence.period().map(millis);
    let (cron, tz) = s.cadence.cron_expr().unzip();
    let template = serde_json::to_string(&Template::of(&s.job))
        .map_err(|e| Error::Corrupt(format!("schedule template: {e}")))?;
    c.execute(
        PUT,
        args![
            s.tenant.as_str(),
            s.name.as_str(),
            every_ms,
            cron.map(str::to_owned),
            tz.map(str::to_owned),
            template,
            s.start_at.map(Timestamp::as_millis),
            s.end_at.map(Timestamp::as_millis),
            s.limit.map(|n| n as i64),
            next.map(Timestamp::as_millis),
            now
        ],
    )
    .await?;
    let stored = get(c, &s.tenant, &s.name)
        .await?
        .ok_or_else(|| Error::Corrupt(format!("schedule {:?} vanished once stored", s.name)))?;
    Ok((stored, existed))
}

/// The tenant's schedule `name`.
pub async fn get(c: &mut impl Conn, tenant: &str, name: &str) -> Result<Option<Schedule>, Error> {
    let rows = c.records(GET, args![tenant, name], decode).await?;
    Ok(rows.into_iter().next().map(|(s, _)| s))
}

/// The schedules of `tenant` (every tenant's if `None`), by name.
pub async fn list(c: &mut impl Conn, tenant: Option<&str>) -> Result<Vec<Schedule>, Error> {
    let rows = match tenant {
        Some(t) => {
            c.records(LIST_TENANT, args![t, MAX_LIST as i64], decode)
                .await?
        }
        None => c.records(LIST_ALL, args![MAX_LIST as i64], decode).await?,
    };
    Ok(rows.into_iter().map(|(s, _)| s).collect())
}

/// Deletes the tenant's schedule `name`; whether there was one. Jobs it
/// enqueued stay.
pub async fn delete(c: &mut impl Conn, tenant: &str, name: &str) -> Result<bool, Error> {
    Ok(c.execute(DELETE, args![tenant, name]).await? > 0)
}

/// Fires the due ticks of up to `max` schedules: for each, moves it past
/// its tick and enqueues the tick's job, in the caller's transaction.
/// Answers the jobs this call enqueued (not those another replica's call
/// fired meanwhile).
pub async fn fire(
    c: &mut impl Conn,
    dialect: &Dialect,
    max: u32,
    now: Timestamp,
    ttl: Duration,
) -> Result<Vec<Job>, Error> {
    let due = c.records(DUE, args![now, i64::from(max)], decode).await?;
    let mut fired = Vec::new();
    for (s, template) in due {
        let Some(tick) = s.next_run_at else { continue };
        let cadence = match (&s.every_ms, &s.cron, &s.tz) {
            (Some(ms), _, _) => Cadence::every(Duration::from_millis(*ms)),
            (None, Some(expr), Some(tz)) => Cadence::cron(expr, tz),
            _ => {
                return Err(Error::Corrupt(format!(
                    "schedule {:?} of {:?} has no cadence",
                    s.name, s.tenant
                )));
            }
        };
        let runs = s.runs + 1;
        // A cadence that no longer reads (a time zone gone from the
        // system's database) ends the schedule after this tick rather
        // than stopping every other schedule's firing.
        let next = match cadence {
            Ok(cadence) => {
                let anchor = s.start_at.unwrap_or(s.created_at);
                // Catch-up once: the tick after now, not after the one fired.
                cadence.after(now.max(tick), anchor)
            }
            Err(e) => {
                tracing::warn!(schedule = %s.name, tenant = %s.tenant, error = %e, "schedule ends: its cadence no longer reads");
                None
            }
        }
        .filter(|t| s.end_at.is_none_or(|end| *t <= end))
        .filter(|_| s.limit.is_none_or(|limit| runs < limit));
        let moved = c
            .execute(
                ADVANCE,
                args![
                    s.tenant.as_str(),
                    s.name.as_str(),
                    next.map(Timestamp::as_millis),
                    tick,
                    now
                ],
            )
            .await?;
        if moved == 0 {
            continue; // another replica fired this tick
        }
        let template: Template = serde_json::from_str(&template)
            .map_err(|e| Error::Corrupt(format!("schedule {:?}: job template: {e}", s.name)))?;
        let job = template.job(&s.tenant, tick);
        let mut done = super::enqueue::enqueue(c, dialect, job, now, ttl)
            .await?
            .job;
        c.execute(MARK_JOB, args![done.id, s.name.as_str(), tick])
            .await?;
        done.schedule = Some(s.name);
        done.schedule_tick = Some(tick);
        fired.push(done);
    }
    Ok(fired)
}

fn first(v: Vec<i64>) -> i64 {
    v.into_iter().next().unwrap_or(0)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A row of `schedules`, and its job template as stored.
fn decode(row: &dyn Columns) -> Result<(Schedule, String), Error> {
    let text = |col: &'static str| -> Result<String, Error> {
        row.text(col)?
            .ok_or_else(|| Error::Corrupt(format!("schedules.{col} is NULL")))
    };
    let int = |col: &'static str| -> Result<i64, Error> {
        row.int(col)?
            .ok_or_else(|| Error::Corrupt(format!("schedules.{col} is NULL")))
    };
    let at = |col: &'static str| -> Result<Option<Timestamp>, Error> {
        Ok(row.int(col)?.map(Timestamp::from_millis))
    };
    let template = text("job")?;
    let job = serde_json::from_str(&template)
        .map_err(|e| Error::Corrupt(format!("schedules.job: {e}")))?;
    let schedule = Schedule {
        tenant: text("tenant")?,
        name: text("name")?,
        every_ms: row.int("every_ms")?.map(|n| n.max(0) as u64),
        cron: row.text("cron")?,
        tz: row.text("tz")?,
        job,
        start_at: at("start_at")?,
        end_at: at("end_at")?,
        limit: row.int("run_limit")?.map(|n| n.max(0) as u64),
        runs: int("runs")?.max(0) as u64,
        next_run_at: at("next_run")?,
        last_run_at: at("last_run")?,
        created_at: Timestamp::from_millis(int("created_at")?),
        updated_at: Timestamp::from_millis(int("updated_at")?),
    };
    Ok((schedule, template))
}
