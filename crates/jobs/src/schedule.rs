//! Schedules: a job enqueued every so often ([`Cadence::Every`]) or at the
//! ticks of a cron expression in a time zone ([`Cadence::Cron`]).
//!
//! A schedule is its tenant's, named within the tenant. Its next tick is
//! stored (`next_run`); firing a tick is one transaction that moves
//! `next_run` past it **only if it still holds that tick** and enqueues the
//! tick's job, so however many replicas fire at once, one of them wins
//! each tick and the others change nothing
//! ([`Store::fire_schedules`](crate::Store::fire_schedules)).
//!
//! **Catch-up: once.** A schedule whose ticks were missed (every replica
//! was down) fires one job, for the first tick it missed, and its next
//! tick is the first one after now: downtime never sends a burst.
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use sluice_jobs::schedule::{Cadence, NewSchedule};
//! use sluice_jobs::{ManualClock, NewJob, SqliteStore, StoreConfig, Timestamp};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
//! let store = SqliteStore::in_memory(StoreConfig::default().clock(clock.clone())).await?;
//! let every = Cadence::every(Duration::from_secs(1))?;
//! let job = NewJob::new("default", "echo", json!({})).tenant("acme");
//! store.put_schedule(NewSchedule::new("acme", "tick", every, job)).await?;
//!
//! // The first tick is at once; the next one a second later.
//! assert_eq!(store.fire_schedules(100).await?.len(), 1);
//! assert!(store.fire_schedules(100).await?.is_empty());
//! clock.advance(Duration::from_secs(1));
//! let fired = store.fire_schedules(100).await?;
//! assert_eq!(fired[0].schedule.as_deref(), Some("tick"));
//! # Ok(())
//! # }
//! ```

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::new_job::{NewJob, check_name};
use sluice_store::Timestamp;

/// The shortest period of [`Cadence::Every`].
pub const MIN_EVERY: Duration = Duration::from_millis(100);
/// The longest period of [`Cadence::Every`] (a year).
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 86_400);
/// The longest cron expression or time zone name.
pub const MAX_CRON_LEN: usize = 200;
/// The most schedules one tenant may hold.
pub const MAX_PER_TENANT: u64 = 1_000;

/// When a schedule's ticks fall: every period ([`Cadence::every`]), or
/// at the ticks of a cron expression in a time zone ([`Cadence::cron`]).
#[derive(Debug, Clone)]
pub struct Cadence(Inner);

#[derive(Debug, Clone)]
enum Inner {
    /// Every period, from the schedule's start (`start_at`, else when it
    /// was stored): ticks at `start + k·period`.
    Every(Duration),
    /// The ticks of a cron expression, read in a time zone (daylight
    /// saving included: a wall-clock time that does not exist that day is
    /// skipped, one that happens twice fires twice).
    Cron {
        /// The expression as given (5 fields, or 6 with seconds first).
        expr: String,
        /// The IANA time zone name (`UTC`, `Europe/Paris`).
        tz: String,
        schedule: Box<jiff_cron::Schedule>,
        zone: jiff_cron::jiff::tz::TimeZone,
    },
}

/// A cadence that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct CadenceError {
    /// The field at fault: `every_ms`, `cron` or `tz`.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

fn cadence_error(field: &'static str, reason: impl Into<String>) -> CadenceError {
    CadenceError {
        field,
        reason: reason.into(),
    }
}

impl Cadence {
    /// Every `period`, between [`MIN_EVERY`] and [`MAX_EVERY`].
    ///
    /// # Errors
    /// A period out of those bounds.
    pub fn every(period: Duration) -> Result<Cadence, CadenceError> {
        if !(MIN_EVERY..=MAX_EVERY).contains(&period) {
            return Err(cadence_error(
                "every_ms",
                format!(
                    "must be between {} and {} milliseconds",
                    MIN_EVERY.as_millis(),
                    MAX_EVERY.as_millis()
                ),
            ));
        }
        Ok(Cadence(Inner::Every(period)))
    }

    /// The ticks of `expr` (`min hour day month weekday`, or with seconds
    /// first) in time zone `tz`.
    ///
    /// # Errors
    /// An expression that does not parse or never fires, an unknown zone.
    pub fn cron(expr: &str, tz: &str) -> Result<Cadence, CadenceError> {
        if expr.len() > MAX_CRON_LEN || expr.chars().any(char::is_control) {
            return Err(cadence_error(
                "cron",
                format!("must be at most {MAX_CRON_LEN} bytes, without control characters"),
            ));
        }
        if tz.is_empty() || tz.len() > MAX_CRON_LEN || tz.chars().any(char::is_control) {
            return Err(cadence_error("tz", "must be an IANA time zone name"));
        }
        let fields = expr.split_whitespace().count();
        let full = match fields {
            5 => format!("0 {expr}"),
            6 => expr.to_owned(),
            n => {
                return Err(cadence_error(
                    "cron",
                    format!(
                        "has {n} fields: give 5 (minute hour day month weekday) or 6 (seconds first)"
                    ),
                ));
            }
        };
        let schedule = jiff_cron::Schedule::from_str(&full)
            .map_err(|e| cadence_error("cron", format!("does not parse: {e}")))?;
        let zone = jiff_cron::jiff::tz::TimeZone::get(tz)
            .map_err(|e| cadence_error("tz", format!("unknown time zone {tz:?}: {e}")))?;
        let cadence = Cadence(Inner::Cron {
            expr: expr.to_owned(),
            tz: tz.to_owned(),
            schedule: Box::new(schedule),
            zone,
        });
        if cadence
            .after(Timestamp::from_millis(0), Timestamp::from_millis(0))
            .is_none()
        {
            return Err(cadence_error("cron", "never fires"));
        }
        Ok(cadence)
    }

    /// The first tick strictly after `t`, for a schedule anchored at
    /// `anchor` (where [`Cadence::Every`] counts its periods from).
    pub fn after(&self, t: Timestamp, anchor: Timestamp) -> Option<Timestamp> {
        match &self.0 {
            Inner::Every(period) => {
                let p = i64::try_from(period.as_millis()).ok()?.max(1);
                let (t, a) = (t.as_millis(), anchor.as_millis());
                if t < a {
                    return Some(anchor);
                }
                let k = (t - a) / p + 1;
                Some(Timestamp::from_millis(a.checked_add(k.checked_mul(p)?)?))
            }
            Inner::Cron { schedule, zone, .. } => {
                let from = jiff_cron::jiff::Timestamp::from_millisecond(t.as_millis()).ok()?;
                let next = schedule.after(from.to_zoned(zone.clone())).next()?;
                Some(Timestamp::from_millis(next.timestamp().as_millisecond()))
            }
        }
    }

    /// The period, for a cadence of [`Cadence::every`].
    pub fn period(&self) -> Option<Duration> {
        match &self.0 {
            Inner::Every(p) => Some(*p),
            Inner::Cron { .. } => None,
        }
    }

    /// The expression and time zone, for a cadence of [`Cadence::cron`].
    pub fn cron_expr(&self) -> Option<(&str, &str)> {
        match &self.0 {
            Inner::Every(_) => None,
            Inner::Cron { expr, tz, .. } => Some((expr, tz)),
        }
    }

    /// The first tick at or after `t`.
    pub fn at_or_after(&self, t: Timestamp, anchor: Timestamp) -> Option<Timestamp> {
        self.after(Timestamp::from_millis(t.as_millis() - 1), anchor)
    }
}

/// A schedule to store ([`Store::put_schedule`](crate::Store::put_schedule)).
#[derive(Debug, Clone)]
pub struct NewSchedule {
    /// Its owner; the jobs it enqueues are this tenant's.
    pub tenant: String,
    /// Its name, unique within the tenant.
    pub name: String,
    /// When it fires.
    pub cadence: Cadence,
    /// The job each tick enqueues: due at once, carrying its schedule and tick, its tenant
    /// the schedule's, and it has no idempotency key (the tick is the key).
    pub job: NewJob,
    /// No tick before this instant (now if `None`).
    pub start_at: Option<Timestamp>,
    /// No tick after this instant.
    pub end_at: Option<Timestamp>,
    /// At most this many runs.
    pub limit: Option<u64>,
}

impl NewSchedule {
    /// A schedule of `tenant` named `name` enqueueing `job` at `cadence`'s ticks.
    pub fn new(
        tenant: impl Into<String>,
        name: impl Into<String>,
        cadence: Cadence,
        job: NewJob,
    ) -> Self {
        Self {
            tenant: tenant.into(),
            name: name.into(),
            cadence,
            job,
            start_at: None,
            end_at: None,
            limit: None,
        }
    }

    /// Sets its first possible tick.
    #[must_use]
    pub fn start_at(mut self, at: Timestamp) -> Self {
        self.start_at = Some(at);
        self
    }

    /// Sets its last possible tick.
    #[must_use]
    pub fn end_at(mut self, at: Timestamp) -> Self {
        self.end_at = Some(at);
        self
    }

    /// Sets the most runs it makes.
    #[must_use]
    pub fn limit(mut self, runs: u64) -> Self {
        self.limit = Some(runs);
        self
    }

    /// Checks names and bounds.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming the field.
    pub fn validate(&self) -> Result<(), crate::Error> {
        check_name("tenant", &self.tenant)?;
        check_name("name", &self.name)?;
        self.job.validate()?;
        if self.job.tenant != self.tenant {
            return Err(crate::new_job::invalid(
                "job.tenant",
                "must be the schedule's tenant",
            ));
        }
        if self.job.idempotency_key.is_some() || self.job.run_at.is_some() {
            return Err(crate::new_job::invalid(
                "job",
                "a schedule's job takes no idempotency key or run_at: each tick sets them",
            ));
        }
        if self.limit == Some(0) || self.limit.is_some_and(|n| n > i64::MAX as u64) {
            return Err(crate::new_job::invalid(
                "limit",
                "must be at least 1 and fit in 63 bits",
            ));
        }
        if let (Some(start), Some(end)) = (self.start_at, self.end_at)
            && end < start
        {
            return Err(crate::new_job::invalid("end_at", "is before start_at"));
        }
        Ok(())
    }
}

/// A stored schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its owner.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// The period in milliseconds, for a schedule that runs every so often.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The cron expression, for one that runs at a cron's ticks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The time zone the cron expression is read in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// The job template: `queue`, `kind`, `payload`, `group`, `priority`,
    /// `max_attempts`.
    pub job: Value,
    /// Its first possible tick.
    pub start_at: Option<Timestamp>,
    /// Its last possible tick.
    pub end_at: Option<Timestamp>,
    /// The most runs it makes.
    pub limit: Option<u64>,
    /// Runs so far.
    pub runs: u64,
    /// Its next tick; `None` once it has ended.
    pub next_run_at: Option<Timestamp>,
    /// The tick of its last run.
    pub last_run_at: Option<Timestamp>,
    /// When it was stored.
    pub created_at: Timestamp,
    /// When it last changed (stored again, or fired).
    pub updated_at: Timestamp,
}

/// The template of a schedule's job as stored: what [`NewJob`] holds but
/// the tenant (the schedule's), the key and the time (each tick's).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Template {
    pub queue: String,
    pub kind: String,
    pub payload: Value,
    pub group: String,
    pub priority: i32,
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl Template {
    pub(crate) fn of(job: &NewJob) -> Self {
        Self {
            queue: job.queue.clone(),
            kind: job.kind.clone(),
            payload: job.payload.clone(),
            group: job.group.clone(),
            priority: job.priority,
            max_attempts: job.max_attempts,
            traceparent: job.traceparent.clone(),
        }
    }

    /// The job of the tick at `tick`.
    pub(crate) fn job(self, tenant: &str, tick: Timestamp) -> NewJob {
        let mut job = NewJob::new(self.queue, self.kind, self.payload)
            .tenant(tenant)
            .group(self.group)
            .priority(self.priority)
            .max_attempts(self.max_attempts)
            .run_at(tick);
        job.traceparent = self.traceparent;
        job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn every_counts_periods_from_its_anchor() {
        let every = Cadence::every(Duration::from_millis(1_000)).unwrap();
        assert_eq!(every.after(at(T0 - 5), at(T0)), Some(at(T0)));
        assert_eq!(every.at_or_after(at(T0), at(T0)), Some(at(T0)));
        assert_eq!(every.after(at(T0), at(T0)), Some(at(T0 + 1_000)));
        assert_eq!(every.after(at(T0 + 2_500), at(T0)), Some(at(T0 + 3_000)));
        assert!(Cadence::every(Duration::from_millis(99)).is_err());
        assert!(Cadence::every(MAX_EVERY + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn cron_ticks_in_its_time_zone() {
        // 09:00 on weekdays in Paris: 2023-11-14 is a Tuesday, UTC+1 in winter.
        let cron = Cadence::cron("0 9 * * Mon-Fri", "Europe/Paris").unwrap();
        let tue_noon_utc = 1_699_963_200_000; // 2023-11-14T12:00:00Z
        let wed_9_paris = 1_700_035_200_000; // 2023-11-15T08:00:00Z
        assert_eq!(cron.after(at(tue_noon_utc), at(0)), Some(at(wed_9_paris)));
        let utc = Cadence::cron("0 9 * * Mon-Fri", "UTC").unwrap();
        assert_eq!(
            utc.after(at(tue_noon_utc), at(0)),
            Some(at(wed_9_paris + 3_600_000))
        );
        // Seconds first, six fields.
        let secs = Cadence::cron("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(secs.after(at(T0), at(0)), Some(at(T0 + 10_000)));
    }

    #[test]
    fn bad_cadences_name_their_field() {
        let field = |r: Result<Cadence, CadenceError>| r.unwrap_err().field;
        assert_eq!(field(Cadence::cron("* * *", "UTC")), "cron");
        assert_eq!(field(Cadence::cron("61 * * * *", "UTC")), "cron");
        assert_eq!(field(Cadence::cron("0 0 30 2 *", "UTC")), "cron");
        assert_eq!(field(Cadence::cron("0 9 * * *", "Mars/Olympus")), "tz");
        assert_eq!(field(Cadence::cron("0 9 * * *", "")), "tz");
    }
}
