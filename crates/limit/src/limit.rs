//! [`Limit`]: what a resource allows, and under which algorithm.

use std::time::Duration;

use crate::Error;

/// The algorithm that meters a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Algorithm {
    /// Continuous refill at `capacity / window`, holding at most `burst`.
    #[default]
    TokenBucket,
    /// The generic cell rate algorithm: the same admissions as a token bucket
    /// with the same rate and burst, kept as one timestamp per resource.
    Gcra,
    /// At most `capacity` in any `window`: exact (a log of takes) for small
    /// capacities, a two-counter estimate for large ones.
    SlidingWindow,
    /// At most `capacity` held at once; a grant holds its cost until dropped.
    InFlight,
}

impl Algorithm {
    /// The name used in configuration files and APIs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::InFlight => "in_flight",
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "token_bucket" => Algorithm::TokenBucket,
            "gcra" => Algorithm::Gcra,
            "sliding_window" => Algorithm::SlidingWindow,
            "in_flight" => Algorithm::InFlight,
            other => return Err(Error::InvalidAlgorithm(other.to_owned())),
        })
    }
}

/// Capacities up to this use the exact sliding-window log; above it, the
/// two-counter estimate (bounded memory for large limits).
pub const EXACT_WINDOW_MAX: u64 = 1_000;

/// The largest capacity or burst a limit may have: far beyond any real
/// quota (about 2.8 × 10¹⁴ a window), and small enough that every
/// algorithm's arithmetic (tokens × window nanoseconds) stays within its
/// integers.
pub const MAX_CAPACITY: u64 = 1 << 48;

/// The longest window a limit may have: a year and a day.
pub const MAX_WINDOW: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// What a resource allows: `capacity` per `window`, holding up to `burst`.
///
/// Plain data, checked when handed to the limiter: a zero capacity, window or
/// burst is rejected there with [`Error::InvalidCapacity`] or
/// [`Error::InvalidWindow`].
///
/// ```
/// use std::time::Duration;
/// use sluice_limit::{Algorithm, Limit};
///
/// // The seed's `openai/` models: 3 requests/s, bursts of 10.
/// let model = Limit::per_second(3).burst(10);
/// // 2.5 requests/s is 5 per 2 s.
/// let fractional = Limit::new(5, Duration::from_secs(2));
/// // A session may make 10 requests in any 60 s.
/// let session = Limit::sliding_window(10, Duration::from_secs(60));
/// // At most 4 calls in flight.
/// let concurrency = Limit::in_flight(4);
/// assert_eq!(concurrency.kind(), Algorithm::InFlight);
/// assert_eq!(model.max_cost(), 10);
/// # let _ = (fractional, session);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    algorithm: Algorithm,
    capacity: u64,
    window: Duration,
    burst: Option<u64>,
    provisional: bool,
}

impl Limit {
    /// A token bucket of `capacity` per `window`, bursting to `capacity`.
    pub const fn new(capacity: u64, window: Duration) -> Self {
        Limit {
            algorithm: Algorithm::TokenBucket,
            capacity,
            window,
            burst: None,
            provisional: false,
        }
    }

    /// A token bucket of `n` per second.
    pub const fn per_second(n: u64) -> Self {
        Limit::new(n, Duration::from_secs(1))
    }

    /// A token bucket of `n` per minute (tokens/min limits of providers).
    pub const fn per_minute(n: u64) -> Self {
        Limit::new(n, Duration::from_secs(60))
    }

    /// GCRA with `capacity` per `window`.
    pub const fn gcra(capacity: u64, window: Duration) -> Self {
        Limit::new(capacity, window).algorithm(Algorithm::Gcra)
    }

    /// At most `capacity` in any `window`.
    pub const fn sliding_window(capacity: u64, window: Duration) -> Self {
        Limit::new(capacity, window).algorithm(Algorithm::SlidingWindow)
    }

    /// At most `n` held at once.
    pub const fn in_flight(n: u64) -> Self {
        Limit::new(n, Duration::from_secs(1)).algorithm(Algorithm::InFlight)
    }

    /// The same limit under another algorithm.
    pub const fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The most a bucket (token bucket, GCRA) holds; defaults to `capacity`.
    /// Ignored by sliding windows and in-flight limits.
    pub const fn burst(mut self, burst: u64) -> Self {
        self.burst = Some(burst);
        self
    }

    /// Marks the limit as a guess (a built-in default, not a number the
    /// upstream published): when the upstream announces a higher rate in
    /// its rate-limit headers, adaptive control follows it above this
    /// limit. A limit that is not provisional (one a user configured) is a
    /// ceiling: announcements only lower the rate below it.
    pub const fn provisional(mut self, provisional: bool) -> Self {
        self.provisional = provisional;
        self
    }

    /// Whether the limit is a guess (see [`Limit::provisional`]).
    pub const fn is_provisional(&self) -> bool {
        self.provisional
    }

    /// The algorithm.
    pub const fn kind(&self) -> Algorithm {
        self.algorithm
    }

    /// Tokens per window (or slots, for in-flight limits).
    pub const fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The refill period.
    pub const fn window(&self) -> Duration {
        self.window
    }

    /// The window in nanoseconds (at least 1), as the algorithms use it.
    pub(crate) fn window_nanos(&self) -> u64 {
        u64::try_from(self.window.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The burst the algorithms use: the configured one for buckets, the
    /// capacity otherwise.
    pub const fn effective_burst(&self) -> u64 {
        match (self.algorithm, self.burst) {
            (Algorithm::TokenBucket | Algorithm::Gcra, Some(b)) => b,
            _ => self.capacity,
        }
    }

    /// The largest cost one grant can ever take: anything larger is refused
    /// at once as [`Error::InsufficientCapacity`].
    pub const fn max_cost(&self) -> u64 {
        self.effective_burst()
    }

    /// The same limit scaled to `capacity` per window, keeping the burst's
    /// ratio to the capacity (adaptive control and `set_capacity` use this,
    /// so halving a 5/s burst-15 limit gives 2/s burst 7, not 2/s burst 15).
    pub(crate) fn scaled_to(&self, capacity: u64, window: Duration) -> Limit {
        let burst = self.burst.map(|b| {
            if self.capacity == 0 {
                b
            } else {
                crate::meter::mul_div_floor(b, capacity, self.capacity).max(1)
            }
        });
        Limit {
            algorithm: self.algorithm,
            capacity,
            window,
            burst,
            provisional: self.provisional,
        }
    }

    /// Rejects what no algorithm can work with.
    ///
    /// # Errors
    /// [`Error::InvalidCapacity`] for a zero capacity or burst, or one over
    /// [`MAX_CAPACITY`]; [`Error::InvalidWindow`] for a zero window or one
    /// over [`MAX_WINDOW`].
    pub fn validate(&self) -> Result<(), Error> {
        for (what, value) in [("capacity", Some(self.capacity)), ("burst", self.burst)] {
            if let Some(value) = value
                && !(1..=MAX_CAPACITY).contains(&value)
            {
                return Err(Error::InvalidCapacity { what, value });
            }
        }
        let timed = self.algorithm != Algorithm::InFlight;
        if timed && (self.window.is_zero() || self.window > MAX_WINDOW) {
            return Err(Error::InvalidWindow(self.window));
        }
        Ok(())
    }

    /// Tokens per second, for display.
    pub fn per_second_rate(&self) -> f64 {
        self.capacity as f64 / self.window.as_secs_f64()
    }
}
