//! The usage ledger: one [`Record`] per model call, proxied API call and
//! job attempt — who called (tenant, key, user, feature), what (provider,
//! model, endpoint, status), what it used (tokens as the provider reported
//! them, or estimated and marked so) and cost (integer nanodollars), how
//! long it took and waited.
//!
//! A [`LedgerStore`] keeps records in SQLite (one machine) or PostgreSQL
//! (several gateways) with rollups per minute, hour and day per tenant,
//! key, model and feature, updated in the transaction that inserts the
//! records. [`Ledger`] is the background writer in front of it (a
//! [`sluice_spool::Spool`]): a request hands its record over and never
//! waits; a full queue spills to a file that is written back; shutdown
//! drains.
//!
//! ```
//! use sluice_ledger::{Granularity, Ledger, LedgerStore, Query, Record};
//! use sluice_spool::SpoolConfig;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_ledger::Error> {
//! let store = LedgerStore::in_memory().await?;
//! let (ledger, task) = Ledger::spawn(store.clone(), SpoolConfig::new("ledger"));
//! let mut r = Record::new("req-1", "acme", "model", "openai", "openai/gpt-4o-mini", "/v1/chat/completions");
//! r.prompt_tokens = 1_000;
//! r.cost_nanos = 150_000;
//! ledger.push(r);
//! task.shutdown().await; // drains the queue
//! let rows = store.usage(&Query::new(0, i64::MAX, Granularity::Total)).await?;
//! assert_eq!((rows[0].requests, rows[0].prompt_tokens, rows[0].cost_nanos), (1, 1_000, 150_000));
//! # Ok(())
//! # }
//! ```

mod bodies;
mod direct;
mod find;
mod pg;
mod query;
mod record;
mod rollup;
mod spent;
mod store;

pub use bodies::{Bodies, CUT, REDACTED, redact};
pub use find::{Filter, MAX_PAGE};
pub use query::{Dim, Granularity, Query, Row, SUMS, Totals};
pub use record::Record;
pub use sluice_store::now_ms;
pub use spent::Spent;
pub use store::LedgerStore;

/// The background writer of records (see the crate doc).
pub type Ledger = sluice_spool::Spool<Record>;

/// What went wrong with the ledger store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused, could not be reached, or its schema could
    /// not be brought up to date.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A SQLite file refused a batch written on the writer's own thread.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The store was closed ([`LedgerStore::close`]).
    #[error("the ledger store is closed")]
    Closed,
}
