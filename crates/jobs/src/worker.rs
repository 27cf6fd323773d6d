//! Workers: run stored jobs with the handlers of their kinds, under the
//! shared limiter, with leases kept alive, retries, rescue and cleanup.
//!
//! - **Claiming.** One loop per queue claims as many jobs as it has free
//!   slots (its concurrency); a paused queue yields nothing and is polled.
//! - **Rates.** Before its handler starts, a run takes one unit from the
//!   limiter resource `jobs:{queue}` (and `jobs:{queue}:{tenant}:{group}` with a
//!   group rate), waiting in FIFO order while it keeps its lease alive.
//!   The limiter is the gateway's ([`sluice_limit::RateLimiter`]: in-process, or
//!   through Redis when distributed), so job calls and interactive calls
//!   to the same API share its bucket as well, on every replica.
//! - **Outcomes.** See [`Outcome`]: completed; retry with exponential
//!   backoff and full jitter ([`Backoff`]); throttled (rescheduled without
//!   an attempt, bounded by [`PoolConfig::max_throttles`]); fatal (dead at
//!   once). A panicking handler is a retryable failure. All are persisted
//!   as the job's state and `run_at`, so they survive restarts.
//! - **Group commit.** Completions go to one batcher task per pool,
//!   which writes every completion waiting with one transaction (each
//!   still guarded by its lease); a run counts as done once its batch is
//!   committed. A run frees its slot when its handler returns, so the
//!   next jobs run while the batch commits; its lease is kept until the
//!   commit, and the outcomes awaiting one are bounded
//!   ([`QueueConfig::awaiting_commit`]).
//! - **Crashes.** Leases are renewed by heartbeat, every running job's
//!   of a pool at once (one statement per 1,000); a pool that dies leaves
//!   them to expire and any pool's rescuer takes the jobs back.
//! - **Shutdown.** [`WorkerPool::shutdown`] stops claiming, waits for
//!   running jobs until its deadline, then gives the rest back at once
//!   with no attempt used.

mod backoff;
mod batch;
mod config;
mod handler;
mod health;
mod heartbeat;
mod kind;
mod pool;
mod progress;
mod run;
mod wake;

pub use backoff::Backoff;
pub use config::{
    DEFAULT_AWAITING_PER_SLOT, DEFAULT_CONCURRENCY, DEFAULT_MAX_THROTTLES, DEFAULT_RATE,
    PoolConfig, QueueConfig,
};
pub use handler::{BoxFuture, HandlerFn, Handlers, JobHandler, Outcome, handler_fn};
pub use health::StoreHealth;
pub use kind::{Kind, Kinds, PayloadError};
pub use pool::{ShutdownReport, WorkerPool, WorkerPoolBuilder};
pub use progress::{children, report_progress};
