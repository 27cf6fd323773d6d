//! The audit trail: who changed what, when, from what to what.
//!
//! An [`AuditStore`] keeps [`Entry`]s in SQLite (one machine) or
//! PostgreSQL (several gateways), in its own table beside the job store's.
//! An [`AuditLog`] hands entries to a background task through a bounded
//! queue and never waits: the task writes them in batches; when the queue
//! is full (or the database fails) entries are appended to a spill file,
//! counted, and written to the database later (at the next batch, at
//! start, at shutdown). Nothing is dropped without being counted and
//! logged.
//!
//! ```
//! use sluice_audit::{AuditLog, AuditStore, Filter, NewEntry};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_audit::Error> {
//! let store = AuditStore::in_memory().await?;
//! let (log, task) = AuditLog::spawn(store.clone(), 1_000, None);
//! log.record(
//!     NewEntry::now("admin", "limit.set", "openai/gpt-4o")
//!         .before(json!({"requests_per_minute": 500}))
//!         .after(json!({"requests_per_minute": 100})),
//! );
//! task.shutdown().await; // drains the queue
//! let entries = store.query(&Filter::default()).await?;
//! assert_eq!(entries[0].kind, "limit.set");
//! # Ok(())
//! # }
//! ```

mod store;
mod writer;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use store::AuditStore;
pub use writer::{AuditLog, AuditTask, DEFAULT_QUEUE};

/// What went wrong with the audit store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused or could not be reached.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored row is not what this version writes.
    #[error("corrupt audit row: {0}")]
    Corrupt(String),
}

/// One administrative act, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Increasing in the order entries were stored.
    pub id: i64,
    /// When the act happened, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Who: `admin` (the admin token), `key:{id}`, `tenant:{name}`,
    /// `bus:{replica}`, `system`.
    pub actor: String,
    /// What, as `{object}.{verb}`: `limit.set`, `key.revoke`, ….
    pub kind: String,
    /// What it was done to: a resource, key id, tenant, queue, job id.
    pub target: String,
    /// The state before, when there was one.
    pub before: Option<Value>,
    /// The state after, when there is one.
    pub after: Option<Value>,
    /// The request that did it, when one did.
    pub request_id: Option<String>,
}

/// An act to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEntry {
    /// See [`Entry::at_ms`].
    pub at_ms: i64,
    /// See [`Entry::actor`].
    pub actor: String,
    /// See [`Entry::kind`].
    pub kind: String,
    /// See [`Entry::target`].
    pub target: String,
    /// See [`Entry::before`].
    pub before: Option<Value>,
    /// See [`Entry::after`].
    pub after: Option<Value>,
    /// See [`Entry::request_id`].
    pub request_id: Option<String>,
}

impl NewEntry {
    /// An act by `actor` of `kind` on `target`, now.
    pub fn now(
        actor: impl Into<String>,
        kind: impl Into<String>,
        target: impl Into<String>,
    ) -> NewEntry {
        NewEntry {
            at_ms: sluice_store::now_ms(),
            actor: actor.into(),
            kind: kind.into(),
            target: target.into(),
            before: None,
            after: None,
            request_id: None,
        }
    }

    /// With the state before.
    #[must_use]
    pub fn before(mut self, v: Value) -> NewEntry {
        self.before = Some(v);
        self
    }

    /// With the state after.
    #[must_use]
    pub fn after(mut self, v: Value) -> NewEntry {
        self.after = Some(v);
        self
    }

    /// With the request that did it.
    #[must_use]
    pub fn request(mut self, id: impl Into<String>) -> NewEntry {
        self.request_id = Some(id.into());
        self
    }
}

/// Which entries to read: all conditions hold; newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// At or after, ms since the Unix epoch.
    pub from_ms: Option<i64>,
    /// Before, ms since the Unix epoch.
    pub to_ms: Option<i64>,
    /// Exactly this actor.
    pub actor: Option<String>,
    /// Exactly this kind, or every kind starting with it and a dot
    /// (`key` matches `key.revoke`).
    pub kind: Option<String>,
    /// Only entries with a smaller id (the next page).
    pub before_id: Option<i64>,
    /// At most this many (at most [`Filter::MAX_LIMIT`]).
    pub limit: u32,
}

impl Filter {
    /// The most a page holds.
    pub const MAX_LIMIT: u32 = 1_000;
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            from_ms: None,
            to_ms: None,
            actor: None,
            kind: None,
            before_id: None,
            limit: 100,
        }
    }
}
