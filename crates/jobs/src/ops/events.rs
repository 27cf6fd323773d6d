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
/// A job's events in order; `$2` bounds them.
const OF_JOB: &str = "SELECT * FROM job_events WHERE job_id = $1 ORDER BY seq LIMIT $2";
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
pub async fn of_job(c: &mut impl Conn, job: JobId, limit: u32) -> Result<Vec<JobEvent>, Error> {
    let limit = i64::from(limit.clamp(1, MAX_EVENTS));
    c.records(OF_JOB, args![job, limit], decode).await
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
