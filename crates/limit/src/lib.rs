//! Rate limiting for the outbound calls of AI agent swarms: token bucket,
//! GCRA, sliding window and in-flight limits on keyed resources, with FIFO
//! waiting, reserve-and-settle, and adaptive control on upstream 429s.
//!
//! ```
//! use std::time::Duration;
//! use sluice_limit::{Error, Limit, Limiter, Rules};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! // Per model prefix and per API, 10 per 60 s per session, tokens per minute.
//! let rules = Rules::new()
//!     .prefix("openai/", Limit::per_second(3).burst(10))
//!     .exact("api:github", Limit::per_second(5).burst(15))
//!     .prefix("session:", Limit::sliding_window(10, Duration::from_secs(60)))
//!     .prefix("tokens:openai/", Limit::per_minute(30_000));
//! let limiter = Limiter::new(rules)?;
//!
//! // Wait (FIFO, up to 5 s) for one request and an estimate of its tokens.
//! let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
//! let mut grant = limiter
//!     .acquire_many(&[("openai/gpt-4o-mini", 1), ("tokens:openai/gpt-4o-mini", 1_200)], Some(deadline))
//!     .await?;
//! // … call the model, then pay for what it really used.
//! grant.settle_part("tokens:openai/gpt-4o-mini", 730)?;
//! drop(grant);
//!
//! // Never wait: say when to come back instead.
//! match limiter.try_acquire("session:abc", 1) {
//!     Ok(_grant) => {}
//!     Err(e) => println!("retry after {:?}", e.retry_after()),
//! }
//!
//! // The provider said 429: halve capacity, pause for its Retry-After.
//! limiter.report_throttled("openai/gpt-4o-mini", Some(Duration::from_secs(2)))?;
//! assert_eq!(limiter.get_capacity("openai/gpt-4o-mini")?.total, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Concepts
//! - A **resource** is a string (`openai/gpt-4o-mini`, `api:gmail`,
//!   `session:abc`). It is created on first use from [`Rules`] (exact name,
//!   longest prefix, fallback) and dropped again when idle, which loses
//!   nothing: an idle resource is full, exactly as its rule would make it.
//! - A [`Limit`] picks one [`Algorithm`]; combine limits by acquiring
//!   several resources at once ([`Limiter::acquire_many`]), all or nothing.
//! - [`Limiter::try_acquire`] never waits; [`Limiter::acquire`] waits in
//!   FIFO order up to a deadline. Both hand out a [`Grant`]: dropping it
//!   releases in-flight slots; [`Grant::settle`] pays the actual cost.
//! - Time comes from a [`Clock`]: tokio's by default, so tests run with
//!   paused time; [`FastClock`] reads the CPU's time-stamp counter, for
//!   limiters that check at high rates.
//! - [`Limiter::check`] and [`Handle::check`] on a token bucket or GCRA
//!   that nothing waits on or holds take one compare-and-swap and no lock.
//! - [`Limiter::report_throttled`] and [`Limiter::observe`] adapt to what
//!   upstreams say ([`AdaptiveConfig`], [`headers`]).
//! - [`RateLimiter`] is what callers need of any limiter, in this process
//!   or shared through Redis (`sluice-redis`); its grants are [`Permit`]s.
//!
//! # Errors
//! Every fallible call returns [`Error`]; waiting ([`Error::RateLimited`],
//! [`Error::DeadlinePassed`]) is kept apart from never
//! ([`Error::InsufficientCapacity`]).
#![warn(missing_docs)]

mod acquire;
mod adaptive;
mod cache;
mod clock;
mod error;
mod grant;
mod handle;
/// Upstream rate-limit headers: the `sluice-headers` crate, here under its
/// old path.
pub use sluice_headers as headers;
mod leases;
mod limit;
mod limit_future;
mod limiter;
mod meter;
mod permit;
mod rate_limiter;
mod registry;
mod resource;
mod rules;

pub use acquire::Acquire;
pub use adaptive::{AdaptiveConfig, CapacityChange, ChangeReason, Policy};
pub use clock::{Clock, FastClock, ManualClock, StdClock, TokioClock};
pub use error::Error;
pub use grant::Grant;
pub use handle::Handle;
pub use leases::GrantId;
pub use limit::{Algorithm, EXACT_WINDOW_MAX, Limit, MAX_CAPACITY, MAX_WINDOW};
pub use limit_future::LimitFuture;
pub use limiter::{Limiter, LimiterBuilder, SweepStats};
pub use permit::{HeldGrant, Permit};
pub use rate_limiter::{RateLimiter, SharedLimiter};
pub use rules::{API_PREFIX, Rules, SESSION_PREFIX, ToolClassifier, api_resource};

use std::time::Duration;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// A resource's state, as `get_capacity` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The resource.
    pub resource: String,
    /// Its algorithm.
    pub algorithm: Algorithm,
    /// What could be taken now (negative while in debt after a settle).
    pub available: f64,
    /// Capacity per window in force (reduced while adapting).
    pub total: u64,
    /// The most one grant can take now.
    pub burst: u64,
    /// The window.
    pub window: Duration,
    /// Grants held.
    pub in_flight: u64,
    /// Tasks queued in `acquire`.
    pub waiting: usize,
    /// The configured capacity, which recovery returns to.
    pub configured: u64,
    /// How much longer a Retry-After pause lasts, if one does.
    pub paused_for: Option<Duration>,
    /// The window of the configured capacity (an announced rate may be
    /// counted over a longer window than the configured one).
    pub configured_window: Duration,
    /// Refill held back once at the start of a busy period so that calls
    /// reaching the upstream with network jitter do not beat its refill
    /// (see [`AdaptiveConfig::jitter_margin`]); widened after collisions.
    pub jitter_margin: Duration,
    /// Why the resource is not simply its configured self, in words:
    /// paused, cut after 429s and recovering, or following an announced
    /// rate.
    pub reason: Option<String>,
    /// The rate per second that the upstream's rate-limit headers
    /// announce, once enough answers agree.
    pub announced_per_second: Option<f64>,
    /// True while the rate in force is the announced one: the headers
    /// announce clearly less than the configured rate (or more than a
    /// guess). An estimate within the headers' rounding of the configured
    /// rate leaves the configured rate in force, and this false.
    pub announced_in_force: bool,
}

impl Capacity {
    /// True while capacity is held below the configured one (by 429s or
    /// by an upstream announcing less).
    pub fn is_reduced(&self) -> bool {
        self.per_second() < self.configured_per_second() * (1.0 - 1e-9)
    }

    /// The rate in force, per second.
    pub fn per_second(&self) -> f64 {
        self.total as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// The configured rate, per second.
    pub fn configured_per_second(&self) -> f64 {
        self.configured as f64 / self.configured_window.as_secs_f64().max(1e-9)
    }
}
