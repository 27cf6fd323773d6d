//! What can go wrong, named for what went wrong.

use std::time::Duration;

/// The limiter's errors.
///
/// Waiting is kept apart from never: [`Error::RateLimited`] and
/// [`Error::DeadlinePassed`] carry how long to wait (it becomes
/// `Retry-After`), while [`Error::InsufficientCapacity`] says the cost can
/// never be granted under the configured limit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The limiter was closed; every waiter is woken with this.
    #[error("limiter closed")]
    Closed,

    /// No rule matches the resource and none was configured.
    #[error("unknown resource {0:?}: no limit is configured for it")]
    UnknownResource(String),

    /// The cost exceeds what the resource can ever hold.
    #[error(
        "cost {cost} exceeds the capacity of {resource:?} ({capacity}); it can never be granted"
    )]
    InsufficientCapacity {
        /// The resource.
        resource: String,
        /// The cost asked for.
        cost: u64,
        /// The most one grant can take.
        capacity: u64,
    },

    /// `try_acquire` was refused: not now.
    #[error("rate limited on {resource:?}{}", fmt_wait(*retry_after))]
    RateLimited {
        /// The resource that refused.
        resource: String,
        /// How long until the cost would be granted; `None` when that is not
        /// a matter of time (in-flight slots free up when grants are dropped).
        retry_after: Option<Duration>,
    },

    /// The deadline passed, or would pass before the cost could be granted.
    #[error("deadline passed waiting for {resource:?}{}", fmt_wait(*wait))]
    DeadlinePassed {
        /// The resource waited on.
        resource: String,
        /// The wait it would have needed, counted from when it gave up, where
        /// known.
        wait: Option<Duration>,
    },

    /// A capacity or burst of zero, or over [`MAX_CAPACITY`](crate::MAX_CAPACITY).
    #[error("invalid {what} {value}: it must be from 1 to 2^48 (281474976710656)")]
    InvalidCapacity {
        /// `"capacity"` or `"burst"`.
        what: &'static str,
        /// The value given.
        value: u64,
    },

    /// A window of zero, or longer than [`MAX_WINDOW`](crate::MAX_WINDOW).
    #[error("invalid window {0:?}: it must be longer than zero and at most 366 days")]
    InvalidWindow(Duration),

    /// An algorithm name that is not one of `token_bucket`, `gcra`,
    /// `sliding_window`, `in_flight`.
    #[error("invalid algorithm {0:?}: expected token_bucket, gcra, sliding_window or in_flight")]
    InvalidAlgorithm(String),

    /// A grant id that is not held (released already, or its lease expired).
    #[error("unknown grant {0}: released already or its lease expired")]
    UnknownGrant(u64),
}

fn fmt_wait(wait: Option<Duration>) -> String {
    match wait {
        Some(w) => format!(" (retry after {} ms)", w.as_millis()),
        None => String::new(),
    }
}

impl Error {
    /// How long a caller should wait before trying again, where waiting helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after, .. } => *retry_after,
            Error::DeadlinePassed { wait, .. } => *wait,
            _ => None,
        }
    }
}
