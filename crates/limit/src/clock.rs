//! Time, injected: algorithms never read a clock of their own.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A source of monotonic time.
///
/// The limiter reads `now` once per decision and hands it to the algorithms.
/// Waiting uses tokio's timers, so a limiter that waits must use a clock that
/// follows tokio's time: [`TokioClock`], the default. [`ManualClock`] suits
/// tests of non-waiting calls such as `try_acquire`.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Instant;

    /// Nanoseconds on a monotonic count of the clock's own, for clocks
    /// that read one faster than they make an `Instant`: the limiter then
    /// reads time this way on every decision. `None` (the default) when
    /// there is none; the limiter then reads [`Clock::now`].
    #[inline]
    fn count_nanos(&self) -> Option<u64> {
        None
    }
}

/// Tokio's clock: real time normally, and under
/// `#[tokio::test(start_paused = true)]` the paused, auto-advancing clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The standard library's monotonic clock. The same as [`TokioClock`] in a
/// program that never pauses tokio's time, without tokio's look-up of a
/// paused clock (which only exists when tokio's `test-util` is on).
#[derive(Debug, Clone, Copy, Default)]
pub struct StdClock;

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The CPU's time-stamp counter, read through `quanta` and calibrated
/// against the monotonic clock (governor's default clock); the monotonic
/// clock itself where the counter is unreliable. About a third of the cost
/// of [`StdClock`] on x86-64, for limiters that check at high rates and do
/// not run under tokio's paused time. It follows real time as [`StdClock`]
/// does, to within the calibration's drift (parts per million): a waiter
/// woken a moment early looks again and sleeps for the rest.
///
/// ```
/// use sluice_limit::{Clock, FastClock, Limit, Limiter, Rules};
///
/// let clock = FastClock::new();
/// let t0 = clock.now();
/// assert!(clock.now() >= t0);
/// let limiter = Limiter::builder()
///     .clock(clock)
///     .rules(Rules::new().exact("r", Limit::per_second(2)))
///     .build()?;
/// assert!(limiter.check("r", 2).is_ok());
/// assert!(limiter.check("r", 1).is_err());
/// # Ok::<(), sluice_limit::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FastClock {
    clock: quanta::Clock,
    origin_raw: u64,
    origin: Instant,
}

impl FastClock {
    /// A clock counting from now. The first one calibrates the counter,
    /// which takes some milliseconds.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        FastClock {
            origin_raw: clock.raw(),
            origin: Instant::now(),
            clock,
        }
    }

    /// Nanoseconds since this clock was made.
    #[inline]
    pub(crate) fn count(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin_raw, self.clock.raw())
    }
}

impl Default for FastClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for FastClock {
    fn now(&self) -> Instant {
        self.origin + Duration::from_nanos(self.count())
    }

    #[inline]
    fn count_nanos(&self) -> Option<u64> {
        Some(self.count())
    }
}

/// A clock that moves only when told to.
///
/// ```
/// use std::time::Duration;
/// use sluice_limit::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now() - t0, Duration::from_millis(250));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    base: Instant,
    offset_nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at an arbitrary instant.
    pub fn new() -> Self {
        ManualClock {
            base: Instant::now(),
            offset_nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves the clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(by, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}
