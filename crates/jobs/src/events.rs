//! Job events: every change of a job, in commit order, read page by page
//! from a cursor ([`Store::events`](crate::Store::events)): what
//! `GET /v1/jobs/events` streams.
//!
//! The store's triggers write them in the transaction of each change, so
//! no path that changes a job can forget one, and a reader that resumes
//! from the cursor of the last event it saw misses none, on several
//! replicas too (see the `job_events` migrations for PostgreSQL's commit
//! order). They are kept for [`Retention::events`](crate::Retention::events).
//!
//! | event | when |
//! |---|---|
//! | `enqueued` | stored (by the API, a schedule or a flow) |
//! | `active` | claimed by a worker |
//! | `progress` | its kind reported progress (`progress`) |
//! | `completed` | completed (`result`) |
//! | `failed` | a run failed and it will run again at `run_at` (`error`) |
//! | `delayed` | put off without using an attempt (an upstream 429, given back at shutdown) |
//! | `dead` | failed for good (`error`) |
//! | `cancelled` | cancelled |
//! | `waiting` | made available again (a dead job retried) |

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::job::JobId;
use sluice_store::Timestamp;

/// The most events one [`Store::events`](crate::Store::events) call reads.
pub const MAX_EVENTS: u32 = 1_000;

/// One change of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    /// Its id: the store's sequence, increasing.
    pub id: i64,
    /// The transaction that wrote it (PostgreSQL; 0 on SQLite): with
    /// `id`, the cursor after it.
    #[serde(skip)]
    pub xid: i64,
    /// `enqueued`, `active`, `progress`, `completed`, `failed`, `delayed`,
    /// `dead`, `cancelled` or `waiting`.
    pub event: String,
    /// The job.
    pub job: JobId,
    /// Its tenant.
    pub tenant: String,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// Its attempts used, then.
    pub attempts: u32,
    /// Its `run_at` then: for `failed`, when it runs again.
    pub run_at: Timestamp,
    /// The error of a `failed` or `dead` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a `progress` event reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// The result of a `completed` job (while the job is kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// When it happened.
    pub at: Timestamp,
}

impl JobEvent {
    /// The cursor that reads on after this event.
    pub fn cursor(&self) -> EventCursor {
        EventCursor {
            xid: self.xid,
            seq: self.id,
        }
    }
}

/// Where a reader of events stands: after this event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventCursor {
    /// The writing transaction of the last event read (0 on SQLite).
    pub xid: i64,
    /// The id of the last event read.
    pub seq: i64,
}

/// Which events a reader wants; `None` is any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this tenant's jobs.
    pub tenant: Option<String>,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this job.
    pub job: Option<JobId>,
}

impl EventFilter {
    /// Whether `e` passes.
    pub fn admits(&self, e: &JobEvent) -> bool {
        self.tenant.as_ref().is_none_or(|t| *t == e.tenant)
            && self.queue.as_ref().is_none_or(|q| *q == e.queue)
            && self.kind.as_ref().is_none_or(|k| *k == e.kind)
            && self.job.is_none_or(|j| j == e.job)
    }
}

/// A page of events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPage {
    /// The events that pass the filter, in order.
    pub events: Vec<JobEvent>,
    /// Where the next read starts: past every event read, passing or not,
    /// so that a filter that passes few costs each read no more.
    pub cursor: EventCursor,
    /// Whether the read was full (more may be waiting at once).
    pub full: bool,
}
