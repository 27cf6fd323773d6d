//! Wall-clock time, injected so that tests control it.
//!
//! What the stores keep outlives processes, so their times are wall-clock
//! instants stored as milliseconds since the Unix epoch, unlike
//! `sluice-limit`'s monotonic [`Instant`](std::time::Instant)s, which mean
//! nothing after a restart.

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// An instant in wall-clock time: milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The instant `ms` milliseconds after the Unix epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

/// `d` later, saturating at the end of time.
impl Add<Duration> for Timestamp {
    type Output = Timestamp;

    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(millis(d)))
    }
}

/// `d` earlier, saturating at the start of time.
impl Sub<Duration> for Timestamp {
    type Output = Timestamp;

    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(millis(d)))
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Self(millis(d)),
            Err(before) => Self(-millis(before.duration())),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the Unix epoch, now, by the system's clock (0
/// before the epoch: a clock that far off is not a time to record).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

/// A source of wall-clock time. Stores read it for every timestamp they
/// write and every "is it due yet" they decide.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from(SystemTime::now())
    }
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use std::time::Duration;
/// use sluice_store::{Clock, ManualClock, Timestamp};
///
/// let clock = ManualClock::new(Timestamp::from_millis(1_000));
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), Timestamp::from_millis(3_000));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.as_millis())))
    }

    /// Moves the clock `d` forward.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(millis(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t` (which may be earlier: wall clocks do step back).
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_millis(5);
        assert_eq!((t + Duration::from_millis(7)).as_millis(), 12);
        assert_eq!((t - Duration::from_millis(7)).as_millis(), -2);
        assert_eq!(
            (Timestamp::from_millis(i64::MAX) + Duration::MAX).as_millis(),
            i64::MAX
        );
        assert_eq!(t.since(Timestamp::from_millis(9)), Duration::ZERO);
        assert_eq!(t.since(Timestamp::EPOCH), Duration::from_millis(5));
    }

    #[test]
    fn system_time_converts() {
        let t = UNIX_EPOCH + Duration::from_millis(1_234);
        assert_eq!(Timestamp::from(t).as_millis(), 1_234);
    }
}
