//! Rate limits shared by several gateway replicas through Redis: the
//! limiter state lives in Redis and changes only inside Lua scripts that
//! read Redis's own clock, so the limits hold across replicas instead of
//! becoming limit × replicas.
//!
//! ```no_run
//! use std::time::Duration;
//! use sluice_limit::{AdaptiveConfig, Limit, Rules};
//! use sluice_redis::{Mode, RedisConfig, RedisLimiter};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rules = Rules::new().prefix("openai/", Limit::per_second(3).burst(10));
//! let mut cfg = RedisConfig::new("redis://127.0.0.1:6379");
//! cfg.mode = Mode::Exact;
//! let limiter = RedisLimiter::connect(cfg, rules, AdaptiveConfig::default()).await?;
//!
//! // Wait (FIFO on this replica, up to 5 s) for one request.
//! let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
//! let grant = limiter.acquire("openai/gpt-4o-mini", 1, Some(deadline)).await?;
//! drop(grant);
//!
//! // An upstream said 429: every replica's capacity halves.
//! limiter.report_throttled("openai/gpt-4o-mini", Some(Duration::from_secs(1))).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Concepts
//! - **Exact mode** ([`Mode::Exact`]): every decision is made in Redis.
//!   Concurrent decisions of one replica are batched into one script call
//!   and several calls are pipelined on one connection, so throughput
//!   grows with load while a lone decision is still one round trip.
//! - **Lanes**: the batcher and its connection run on the runtime
//!   [`RedisLimiter::connect`] ran on; a thread serving on a current-thread
//!   runtime of its own can call [`batch_on_this_thread`] to batch its
//!   decisions on a connection of its own instead, so that none is handed
//!   to another thread and back.
//! - **Leased mode** ([`Mode::Leased`]): token buckets and GCRA are spent
//!   from blocks leased for a short TTL; sliding windows and in-flight
//!   limits stay exact.
//! - **In-flight slots** are leases with an expiry, renewed while held, so
//!   a crashed replica's slots come back after [`RedisConfig::lease_ttl`].
//! - **Deny cache**: a refusal is remembered until its wait has passed;
//!   waiters sleep until then (FIFO per replica), woken early by release
//!   notices on the bus.
//! - **Capacity bus** ([`CapacityUpdate`]): 429s reduce the shared
//!   capacity once for all; recovery (×1.1 every 30 s by default) is
//!   computed inside the scripts from the stored reduction.
//! - **Limits set at run time** ([`RedisLimiter::set_limit`]): resources
//!   no rule names (a job queue's rate) get a limit ahead of the rules,
//!   shared like any other; every replica sets the same one.
//! - **One interface**: [`RedisLimiter`] is a
//!   [`RateLimiter`](sluice_limit::RateLimiter), as the in-process limiter
//!   is; its grants are [`Permit`](sluice_limit::Permit)s.
//! - **Circuit marks** ([`RedisLimiter::open_circuit`],
//!   [`RedisLimiter::claim_probe`]): a circuit breaker's open state and
//!   its one probe, shared by every replica (keys of their own, notices
//!   under [`CIRCUIT_TOPIC`]).
//! - **Failure** ([`Failure`]): while Redis is away each replica limits on
//!   its 1/N share locally, or refuses everything.
//!
//! # Errors
//! Building fails with [`Error`]; limiting answers are
//! [`sluice_limit::Error`], as for the in-process limiter.
#![warn(missing_docs)]

mod batch;
mod bus;
mod circuit;
mod config;
mod conn;
mod error;
mod fallback;
mod grant;
mod handback;
mod lane;
mod leased;
mod limiter;
mod notice;
mod rate_limiter;

pub use bus::CapacityUpdate;
pub use circuit::{CIRCUIT_TOPIC, CircuitNotice, MAX_CIRCUIT_NAME, ProbeClaim};
pub use config::{Failure, Mode, RedisConfig};
pub use error::Error;
pub use grant::RedisGrant;
pub use lane::batch_on_this_thread;
pub use limiter::{MAX_SET_LIMITS, MAX_WEIGHT, RedisLimiter};
pub use notice::{Notice, NoticeEvent};
