//! Reading job events (see [`crate::events`]) and their retention.

use std::collections::HashMap;

use serde_json::Value;
use sluice_store::{Arg, Columns, Timestamp};

use crate::backend::{Conn, args};
use crate::error::Error;
use crate::events::{EventCursor, EventFilter, EventPage, JobEvent, MAX_EVENTS};
use crate::job::JobId;
use crate::sql::Dialect;

const CURSOR_OF: &str = "SELECT xid FROM job_events WHERE seq = $1";
/// The first event after a gap, in commit order.
const AFTER_GAP: &str = "SELECT xid, seq FROM job_events WHERE seq > $1 ORDER BY xid, seq LIMIT 1";
/// A job's events that `job_events_job` lists (all but `active` and
/// `completed`, see [`of_job`]) in order; `$2` bounds them.
const OF_JOB: &str = "SELECT * FROM job_events \
    WHERE job_id = $1 AND event NOT IN ('active', 'completed') ORDER BY seq LIMIT $2";
/// The first of job `$1`'s listed events after `$2` that ends a run or
/// changes its state otherwise (not a `progress`).
const NEXT_CHANGE: &str = "SELECT * FROM job_events \
    WHERE job_id = $1 AND seq > $2 AND event NOT IN ('active', 'completed', 'progress') \
    ORDER BY seq LIMIT 1";
/// What a job's row says of its last run, as an event whose `event` is
/// the job's state (for [`decode`]), with when the run started and when
/// the job finished.
const LAST_RUN: &str = "SELECT CAST(0 AS BIGINT) AS seq, CAST(0 AS BIGINT) AS xid, \
    state AS event, id AS job_id, tenant, queue, kind, attempts, run_at, \
    CAST(NULL AS TEXT) AS error, CAST(NULL AS TEXT) AS progress, CAST(0 AS BIGINT) AS at, \
    started_at, finished_at FROM jobs WHERE id = $1";
/// When the oldest event still kept happened (retention deletes in `seq`
/// order).
const OLDEST_KEPT: &str = "SELECT at FROM job_events ORDER BY seq LIMIT 1";
/// The oldest events, in `seq` order, up to the first that happened at or
/// after `$1` (all if none did): every event deleted happened before `$1`,
/// and one after an event still kept stays with it, however old. The walk
/// follows the primary key, so events need no index by time.
const EXPIRE: &str = "DELETE FROM job_events WHERE seq < COALESCE(\
    (SELECT seq FROM job_events WHERE at >= $1 ORDER BY seq LIMIT 1), \
    9223372036854775807)";

/// Up to `limit` events after `cursor` in commit order; those that pass
/// `filter` are answered, with the results of `completed` jobs.
pub async fn read(
    c: &mut impl Conn,
    dialect: &Dialect,
    cursor: EventCursor,
    filter: &EventFilter,
    limit: u32,
) -> Result<EventPage, Error> {
    let limit = limit.clamp(1, MAX_EVENTS);
    let rows = c
        .records(
            dialect.events_after,
            args![cursor.xid, cursor.seq, i64::from(limit)],
            decode,
        )
        .await?;
    let full = rows.len() == limit as usize;
    let next = rows.last().map_or(cursor, JobEvent::cursor);
    let mut events: Vec<JobEvent> = rows.into_iter().filter(|e| filter.admits(e)).collect();
    let done: Vec<Option<i64>> = events
        .iter()
        .filter(|e| e.event == "completed")
        .map(|e| Some(e.job.0))
        .collect();
    if !done.is_empty() {
        let results: HashMap<i64, Option<String>> = c
            .records(dialect.results_of, vec![Arg::Ints(done)], |row| {
                Ok((
                    row.int("id")?
                        .ok_or_else(|| Error::Corrupt("jobs.id is NULL".into()))?,
                    row.text("result")?,
                ))
            })
            .await?
            .into_iter()
            .collect();
        for e in events.iter_mut().filter(|e| e.event == "completed") {
            e.result = results
                .get(&e.job.0)
                .and_then(|r| r.as_deref())
                .and_then(|r| serde_json::from_str::<Value>(r).ok());
        }
    }
    Ok(EventPage {
        events,
        cursor: next,
        full,
    })
}

/// The cursor that reads on after event `seq` (a client's
/// `Last-Event-ID`). If that event is no longer kept (or never was), the
/// cursor just before the first event after it in commit order: nothing
/// kept is skipped. If no event after it is kept either, the cursor
/// after the last event.
pub async fn cursor_after(
    c: &mut impl Conn,
    dialect: &Dialect,
    seq: i64,
) -> Result<EventCursor, Error> {
    if let Some(xid) = c.ints(CURSOR_OF, args![seq]).await?.into_iter().next() {
        return Ok(EventCursor { xid, seq });
    }
    let first = c.records(AFTER_GAP, args![seq], cursor_of).await?;
    Ok(match first.into_iter().next() {
        Some(EventCursor { xid, seq }) => EventCursor { xid, seq: seq - 1 },
        None => last(c, dialect).await?,
    })
}

/// The cursor after the last event written so far.
pub async fn last(c: &mut impl Conn, dialect: &Dialect) -> Result<EventCursor, Error> {
    let rows = c.records(dialect.events_last, args![], cursor_of).await?;
    Ok(rows.into_iter().next().unwrap_or_default())
}

fn cursor_of(row: &dyn Columns) -> Result<EventCursor, Error> {
    let int = |col| {
        row.int(col)?
            .ok_or_else(|| Error::Corrupt(format!("job_events.{col} is NULL")))
    };
    Ok(EventCursor {
        xid: int("xid")?,
        seq: int("seq")?,
    })
}

/// The first `limit` events of job `job` (while they are kept), oldest
/// first.
///
/// `job_events_job` does not list a run's `active` event nor a job's
/// `completed` one (two index entries a job fewer in a burn-down:
/// migrations 12 and 14): they are put back, with `id` and `xid` 0, from
/// what the rows keep. An event that ends a run keeps when the run started
/// and the attempts used before it; such a run's `active` event goes
/// before the run's `progress` events, which only a running job reports.
/// The job's row keeps when its last run started, for a job running now or
/// completed, and a completed job's `completed` event is its finish. An
/// event put back from before the oldest event still kept is left out, as
/// retention left out the event itself.
pub async fn of_job(c: &mut impl Conn, job: JobId, limit: u32) -> Result<Vec<JobEvent>, Error> {
    let limit = limit.clamp(1, MAX_EVENTS) as usize;
    let listed = c
        .records(OF_JOB, args![job, limit as i64], decode_run)
        .await?;
    let full = listed.len() == limit;
    let last_seq = listed.last().map(|(e, _)| e.id);
    let mut timeline = Timeline::default();
    for (event, run) in listed {
        timeline.push(event, run);
    }
    if full {
        // A run's `progress` events close the page: the run's start is
        // on the event that ended it, or on the row if it has not ended.
        if timeline.progress_from.is_some() {
            let next = c
                .records(NEXT_CHANGE, args![job, last_seq.unwrap_or(0)], decode_run)
                .await?;
            match next.into_iter().next() {
                Some((event, run)) => timeline.end_run(&event, run),
                None => timeline.last_run(c.records(LAST_RUN, args![job], decode_row).await?),
            }
        }
    } else {
        timeline.last_run(c.records(LAST_RUN, args![job], decode_row).await?);
    }
    let mut events = timeline.events;
    if events.iter().any(|e| e.id == 0) {
        let oldest = c.ints(OLDEST_KEPT, args![]).await?.into_iter().next();
        let kept = |e: &JobEvent| e.id != 0 || oldest.is_some_and(|at| e.at.as_millis() >= at);
        events.retain(kept);
    }
    events.truncate(limit);
    Ok(events)
}

/// When a run started and the attempts used before it.
type Run = Option<(Timestamp, u32)>;

/// A job's timeline as its listed events are read, with the `active`
/// events put back (see [`of_job`]).
#[derive(Default)]
struct Timeline {
    events: Vec<JobEvent>,
    /// Where the `progress` events since the last change of state begin:
    /// the current run's, after its `active` event.
    progress_from: Option<usize>,
}

impl Timeline {
    fn push(&mut self, event: JobEvent, run: Run) {
        if event.event == "progress" {
            self.progress_from.get_or_insert(self.events.len());
            self.events.push(event);
            return;
        }
        self.end_run(&event, run);
        self.events.push(event);
    }

    /// `end` changed the job's state: if it ended a run (`run`), that
    /// run's `active` event is put back. Its `run_at` is the job's then:
    /// the last change's before the run (if still kept), else the run's
    /// start.
    fn end_run(&mut self, end: &JobEvent, run: Run) {
        let before = self.progress_from.unwrap_or(self.events.len());
        let run_at = self.events[..before]
            .iter()
            .rev()
            .find(|e| e.event != "progress")
            .map(|e| e.run_at);
        match run {
            Some((started, attempts)) => {
                self.started(end, started, attempts, run_at.unwrap_or(started));
            }
            None => self.progress_from = None,
        }
    }

    /// Puts back the `active` event of a run of `like`'s job that started
    /// at `at`, before the run's `progress` events.
    fn started(&mut self, like: &JobEvent, at: Timestamp, attempts: u32, run_at: Timestamp) {
        let before = self.progress_from.take().unwrap_or(self.events.len());
        let active = put_back(like, "active", at, attempts, run_at);
        self.events.insert(before, active);
    }

    /// The job's last run from its row: `active` if it is running or
    /// completed, and `completed`.
    fn last_run(&mut self, row: Vec<(JobEvent, Option<Timestamp>, Option<Timestamp>)>) {
        let Some((job, started, finished)) = row.into_iter().next() else {
            return;
        };
        let (before, completed) = match job.event.as_str() {
            "running" => (job.attempts, None),
            "completed" => (job.attempts.saturating_sub(1), finished),
            _ => return,
        };
        if let Some(started) = started {
            self.started(&job, started, before, job.run_at);
        }
        if let Some(finished) = completed {
            let done = put_back(&job, "completed", finished, job.attempts, job.run_at);
            self.events.push(done);
        }
    }
}

/// An event of `like`'s job that the index by job does not list.
fn put_back(
    like: &JobEvent,
    event: &str,
    at: Timestamp,
    attempts: u32,
    run_at: Timestamp,
) -> JobEvent {
    JobEvent {
        id: 0,
        xid: 0,
        event: event.to_owned(),
        job: like.job,
        tenant: like.tenant.clone(),
        queue: like.queue.clone(),
        kind: like.kind.clone(),
        attempts,
        run_at,
        error: None,
        progress: None,
        result: None,
        at,
    }
}

/// An event and, if it ended a run, the run.
fn decode_run(row: &dyn Columns) -> Result<(JobEvent, Run), Error> {
    let event = decode(row)?;
    let run = match (row.int("run_started")?, row.int("run_attempts")?) {
        (Some(started), Some(attempts)) => Some((
            Timestamp::from_millis(started),
            u32::try_from(attempts).unwrap_or(0),
        )),
        _ => None,
    };
    Ok((event, run))
}

/// A job's row read by [`LAST_RUN`], with when its last run started and
/// when it finished.
fn decode_row(
    row: &dyn Columns,
) -> Result<(JobEvent, Option<Timestamp>, Option<Timestamp>), Error> {
    let started = row.int("started_at")?.map(Timestamp::from_millis);
    let finished = row.int("finished_at")?.map(Timestamp::from_millis);
    Ok((decode(row)?, started, finished))
}

/// Deletes events that happened before `before`.
pub async fn expire(c: &mut impl Conn, before: Timestamp) -> Result<u64, Error> {
    c.execute(EXPIRE, args![before]).await
}

fn decode(row: &dyn Columns) -> Result<JobEvent, Error> {
    let int = |col: &'static str| -> Result<i64, Error> {
        row.int(col)?
            .ok_or_else(|| Error::Corrupt(format!("job_events.{col} is NULL")))
    };
    let text = |col: &'static str| -> Result<String, Error> {
        row.text(col)?
            .ok_or_else(|| Error::Corrupt(format!("job_events.{col} is NULL")))
    };
    Ok(JobEvent {
        id: int("seq")?,
        xid: int("xid")?,
        event: text("event")?,
        job: JobId(int("job_id")?),
        tenant: text("tenant")?,
        queue: text("queue")?,
        kind: text("kind")?,
        attempts: u32::try_from(int("attempts")?).unwrap_or(u32::MAX),
        run_at: Timestamp::from_millis(int("run_at")?),
        error: row.text("error")?,
        progress: row
            .text("progress")?
            .and_then(|p| serde_json::from_str(&p).ok()),
        result: None,
        at: Timestamp::from_millis(int("at")?),
    })
}
