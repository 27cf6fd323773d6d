//! Durable jobs for the outbound operations of AI agents: a queue that
//! survives crashes, leases each job to one worker at a time, retries with
//! backoff, keeps dead letters, deduplicates by idempotency key and
//! forgets finished jobs after a while. One [`JobStore`] trait, two
//! stores: [`SqliteStore`] on one machine, [`PostgresStore`] for several.
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use sluice_jobs::{Clock, JobState, JobStore, NewJob, RetryDecision, SqliteStore, StoreConfig, SystemClock};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_jobs::Error> {
//! let store = SqliteStore::in_memory(StoreConfig::default()).await?;
//!
//! // Enqueue once; the same key within 24 h returns the same job.
//! let job = NewJob::new("discord", "discord.create_role", json!({"guild_id": "1", "name": "mod"}))
//!     .tenant("acme")
//!     .idempotency_key("create-role-mod");
//! let first = store.enqueue(job.clone()).await?;
//! let again = store.enqueue(job).await?;
//! assert!(again.duplicate && again.job.id == first.job.id);
//!
//! // A worker leases it for 30 s and reports a failure: retry in 1 s.
//! let claimed = store.claim("discord", "worker-1", 10, Duration::from_secs(30)).await?;
//! let lease = claimed[0].lease.clone().expect("a claimed job is leased");
//! let retry_at = SystemClock.now() + Duration::from_secs(1);
//! let failed = store.fail(&lease, "503 from upstream", RetryDecision::RetryAt(retry_at)).await?;
//! assert_eq!((failed.state, failed.attempts), (JobState::Retryable, 1));
//!
//! // The lease is spent: a late completion by the same worker is refused.
//! assert!(store.complete(&lease, json!({"id": "42"})).await.is_err());
//! # Ok(())
//! # }
//! ```
//!
//! # Workers
//! A [`WorkerPool`] claims jobs per queue and runs them with the
//! [`Handlers`] of their kinds, under a shared limiter (the gateway's):
//! `jobs:{queue}` holds each queue to its rate. A kind is any
//! [`JobHandler`]; the kinds that call HTTP APIs (`http`, `discord.*`)
//! are in the `sluice-jobs-http` crate, beside their HTTP client.
//! The limiter is any [`sluice_limit::RateLimiter`]: an in-process
//! [`sluice_limit::Limiter`] (pass it as it is), or limits kept elsewhere,
//! such as the gateway's shared through Redis (pass a
//! [`sluice_limit::SharedLimiter`]).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde_json::json;
//! use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
//! use sluice_jobs::{JobStore, NewJob, SqliteStore, StoreConfig};
//! use sluice_limit::{Limiter, Rules};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(SqliteStore::in_memory(StoreConfig::default()).await?);
//! let limiter = Limiter::new(Rules::new())?;
//!
//! // A kind of our own: echo the payload back as the result.
//! let handlers = Handlers::new()
//!     .on("echo", handler_fn(|job| async move { Outcome::Completed(job.payload) }));
//!
//! // The seed's defaults: 5 at once, 10 starts in any second.
//! let pool = WorkerPool::builder(Arc::clone(&store), limiter.clone())
//!     .handlers(handlers)
//!     .queue(QueueConfig::new("default"))
//!     .start()?;
//!
//! store.enqueue(NewJob::new("default", "echo", json!({"n": 1}))).await?;
//! // … on the way out: finish running jobs for up to 10 s, give back the rest.
//! let report = pool.shutdown(Duration::from_secs(10)).await;
//! assert_eq!(report.released, 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//! - **At least once.** A claim leases a job to one worker; the worker
//!   extends the lease by [`JobStore::heartbeat`]. If it stops (a crash),
//!   [`JobStore::rescue`] takes the job back once the lease has expired and
//!   counts the lost attempt. A job is never taken back for running long.
//! - **Guarded transitions.** Every change names the state it starts from,
//!   and calls on a running job present the [`Lease`] of their claim, so a
//!   worker that lost its lease cannot complete or fail the job.
//! - **Retries persist** as the job's `run_at`: [`RetryDecision::RetryAt`]
//!   uses an attempt, [`RetryDecision::RescheduleAt`] (an upstream 429)
//!   does not, [`RetryDecision::Dead`] gives up. Used-up attempts make the
//!   job dead: a dead letter to inspect, [`retry`](JobStore::retry) or
//!   [`purge`](JobStore::purge_dead).
//! - **Fairness.** A claim takes turns across the tenants of a queue, then
//!   across the groups of each tenant (a group is its tenant's), and the
//!   highest priority first within a group. Jobs not yet due cost a claim
//!   nothing, however many groups they are in.
//! - **Time is injected** ([`StoreConfig`]), so tests drive leases,
//!   retries, TTLs and retention with a [`ManualClock`].
//!
//! # Schema
//! Ids are 64-bit integers from the database's sequence (never reused), so
//! they sort in enqueue order and serve as list cursors. Times are
//! milliseconds since the Unix epoch; payloads and results are JSON text.
//! Each backend embeds its own migrations and applies them when opened.
#![warn(missing_docs)]

mod any;
mod backend;
mod config;
mod conn;
mod counts;
mod error;
pub mod events;
pub mod flow;
mod job;
pub mod metrics;
mod migrate;
mod new_job;
mod ops;
mod postgres;
mod retention;
pub mod schedule;
mod sql;
mod sql_store;
mod sqlite;
mod store;
mod tally;
pub mod worker;

pub use any::{AnyBackend, AnyStore, Either};
pub use config::StoreConfig;
pub use counts::{QueueCounts, StateCounts};
pub use error::Error;
pub use job::{Job, JobId, JobState, JobSummary, Lease, UnknownState};
pub use new_job::{DEFAULT_GROUP, DEFAULT_MAX_ATTEMPTS, MAX_NAME_LEN, NewJob};
pub use ops::claim::MAX_CLAIM;
pub use ops::lease::MAX_ERROR_LEN;
pub use postgres::{PostgresBackend, PostgresStore, without_jit};
pub use retention::{Cleaned, Retention};
pub use sluice_store::{Clock, ManualClock, SystemClock, Timestamp};
pub use sql_store::Store;
pub use sqlite::{SqliteBackend, SqliteOptions, SqliteStore};
pub use store::{Enqueued, JobStore, ListFilter, MAX_PAGE, Page, RetryDecision};
pub use tally::Tally;
pub use worker::{
    Handlers, JobHandler, Kind, Kinds, Outcome, PayloadError, QueueConfig, StoreHealth, WorkerPool,
};
