//! Adaptive control: what an upstream's answers do to a resource.
//!
//! Two policies read a 429 ([`Policy`]):
//! - **evidence** (the default): a limit the limiter was given is a fact.
//!   A 429 is first taken for a timing collision (a call that reached the
//!   upstream a moment before its bucket refilled): the resource pauses for
//!   the Retry-After, falls in step with the answer's headers, and widens
//!   its jitter margin; capacity is cut only when 429s keep coming after
//!   that ([`AdaptiveConfig::strikes`]), and then recovers within seconds
//!   of clean answers. Rate-limit headers that announce a different rate
//!   (see [`estimate`]) set the rate directly, down or back up;
//! - **seed**: the seed's AIMD, for limits that are guesses or that a
//!   capacity bus announces: halve on a 429, ×1.1 every 30 s.

pub(crate) mod estimate;

use std::time::{Duration, Instant};

use crate::Error;
use crate::meter::Nanos;

/// How a resource reacts to an upstream 429 and recovers.
///
/// The defaults are the seed's: halve, at most once per window; pause at
/// most 60 s; then ×1.1 every 30 s up to the configured capacity, so
/// 100 → 50 → 55, 60, 66, 72, 79, 86, 94 and 100 at 240 s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConfig {
    /// Capacity is multiplied by this on a 429 (0 < f < 1).
    pub reduce_factor: f64,
    /// Capacity is multiplied by this at each recovery step (> 1), rounded
    /// down, and grows by at least one.
    pub recovery_factor: f64,
    /// Time between recovery steps, counted from the last reduction.
    pub recovery_interval: Duration,
    /// The longest pause a Retry-After can impose.
    pub max_pause: Duration,
    /// At most one reduction per this long; `None` means the resource's own
    /// window, so a burst of 429s cannot collapse capacity to nothing.
    pub cooldown: Option<Duration>,
    /// How an observed 429 is read.
    pub policy: Policy,
    /// Refill of a token bucket or GCRA held back once at the start of each
    /// busy period (when a grant finds the bucket full, and never more than
    /// it was idle), so that calls reaching the upstream with network
    /// jitter never find its bucket emptier than this one: the upstream's
    /// may have stayed full, wasting refill, up to the jitter longer. Costs
    /// a delay of at most the margin at the start of a busy period (taken
    /// from the burst where it has room, else from time), never the rate.
    /// Zero in the library; the gateway configures it.
    pub jitter_margin: Duration,
    /// The widest the margin grows after collisions.
    pub max_jitter_margin: Duration,
    /// A 429 that asks to wait at most this long (or says the quota resets
    /// within it) is read as a timing collision.
    pub collision_wait: Duration,
    /// Consecutive 429s, each on a call let go after the previous one was
    /// seen, that prove the real limit lower than the configured one.
    pub strikes: u32,
    /// After such a cut, capacity is multiplied by this at each step …
    pub fast_recovery_factor: f64,
    /// … every this long without a 429.
    pub fast_recovery_interval: Duration,
}

/// How an observed 429 is read (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Policy {
    /// Pause, fall in step and widen the margin; cut only on evidence.
    #[default]
    Evidence,
    /// Halve at once, recover ×1.1 every 30 s (the seed's).
    Seed,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            reduce_factor: 0.5,
            recovery_factor: 1.1,
            recovery_interval: Duration::from_secs(30),
            max_pause: Duration::from_secs(60),
            cooldown: None,
            policy: Policy::Evidence,
            jitter_margin: Duration::ZERO,
            max_jitter_margin: Duration::from_millis(250),
            collision_wait: Duration::from_secs(1),
            strikes: 3,
            fast_recovery_factor: 1.25,
            fast_recovery_interval: Duration::from_secs(1),
        }
    }
}

impl AdaptiveConfig {
    /// Where a 429 cannot be tied to the call it answers, the least time
    /// after the last one for it to count as another strike: a tenth of
    /// the collision wait (a burst of answers to calls let go together is
    /// one strike).
    pub fn strike_spacing(&self) -> Duration {
        self.collision_wait / 10
    }

    /// Checks the factors and intervals.
    ///
    /// # Errors
    /// [`Error::InvalidCapacity`] naming the factor, or
    /// [`Error::InvalidWindow`] for a zero recovery interval.
    pub fn validate(&self) -> Result<(), Error> {
        if !(self.reduce_factor > 0.0 && self.reduce_factor < 1.0) {
            return Err(Error::InvalidCapacity {
                what: "reduce_factor (must be between 0 and 1)",
                value: 0,
            });
        }
        if !(self.recovery_factor > 1.0 && self.recovery_factor.is_finite()) {
            return Err(Error::InvalidCapacity {
                what: "recovery_factor (must be above 1)",
                value: 0,
            });
        }
        if !(self.fast_recovery_factor > 1.0 && self.fast_recovery_factor.is_finite()) {
            return Err(Error::InvalidCapacity {
                what: "fast_recovery_factor (must be above 1)",
                value: 0,
            });
        }
        if self.strikes == 0 {
            return Err(Error::InvalidCapacity {
                what: "strikes (must be at least 1)",
                value: 0,
            });
        }
        for interval in [self.recovery_interval, self.fast_recovery_interval] {
            if interval.is_zero() {
                return Err(Error::InvalidWindow(interval));
            }
        }
        Ok(())
    }
}

/// Why a resource's capacity changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeReason {
    /// An upstream answered 429 (under the seed policy), or kept answering
    /// 429 after the limiter fell in step with it (evidence).
    Throttled,
    /// An upstream's rate-limit headers announced a different rate.
    Announced,
    /// A recovery step after a reduction.
    Recovered,
    /// Set through `set_capacity` / `set_limit`.
    Configured,
}

impl ChangeReason {
    /// A lowercase name for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeReason::Throttled => "throttled",
            ChangeReason::Announced => "announced",
            ChangeReason::Recovered => "recovered",
            ChangeReason::Configured => "configured",
        }
    }
}

/// A change of a resource's capacity, handed to `on_change` callbacks.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityChange {
    /// The resource.
    pub resource: String,
    /// Capacity per window before.
    pub previous: u64,
    /// Capacity per window now.
    pub capacity: u64,
    /// The configured capacity, which recovery never exceeds.
    pub configured: u64,
    /// The window.
    pub window: Duration,
    /// Why.
    pub reason: ChangeReason,
    /// When, on the limiter's clock (recovery steps are applied lazily and
    /// carry the time they were due).
    pub at: Instant,
    /// The peer that announced the change (another replica, on a shared
    /// limiter's capacity bus); `None` for a change this limiter made.
    pub announced_by: Option<String>,
}

/// What set the capacity in force below the configured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Nothing: capacity is the configured one.
    None,
    /// The seed's halving; recovery ×1.1 every 30 s.
    Seed,
    /// 429s that kept coming; fast recovery.
    Evidence,
    /// The upstream's headers; they alone move it.
    Announced,
}

/// Per-resource adaptive state; boxed and absent until an upstream's
/// answer gives a reason for it.
#[derive(Debug, Clone)]
pub(crate) struct Adaptive {
    /// What the rules or an operator configured: recovery's ceiling.
    pub(crate) configured: crate::Limit,
    pub(crate) reduced_at: Option<Nanos>,
    pub(crate) next_recovery: Nanos,
    pub(crate) paused_until: Nanos,
    pub(crate) cut: Cut,
    /// Consecutive 429s counted as evidence.
    pub(crate) strikes: u32,
    /// When the last 429 was seen: calls let go before it were already on
    /// their way and prove nothing more.
    pub(crate) last_throttle: Option<Nanos>,
    /// The jitter margin in force, and since when.
    pub(crate) margin: Nanos,
    pub(crate) margin_at: Nanos,
    /// The rate the upstream's headers announce.
    pub(crate) estimate: estimate::Estimate,
}

impl Adaptive {
    pub(crate) fn new(configured: crate::Limit, margin: Nanos) -> Self {
        Adaptive {
            configured,
            reduced_at: None,
            next_recovery: Nanos::MAX,
            paused_until: 0,
            cut: Cut::None,
            strikes: 0,
            last_throttle: None,
            margin,
            margin_at: 0,
            estimate: estimate::Estimate::default(),
        }
    }
}

/// `capacity × factor` rounded down, at least 1.
pub(crate) fn reduced(capacity: u64, factor: f64) -> u64 {
    ((capacity as f64 * factor).floor() as u64).max(1)
}

/// One recovery step: `capacity × factor` rounded down, at least one more,
/// at most `ceiling`.
pub(crate) fn recovered(capacity: u64, factor: f64, ceiling: u64) -> u64 {
    let grown = (capacity as f64 * factor).floor() as u64;
    grown.max(capacity + 1).min(ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_timeline() {
        let mut c = reduced(100, 0.5);
        let mut seen = vec![c];
        while c < 100 {
            c = recovered(c, 1.1, 100);
            seen.push(c);
        }
        assert_eq!(seen, [50, 55, 60, 66, 72, 79, 86, 94, 100]);
    }

    #[test]
    fn small_capacities_still_move() {
        assert_eq!(reduced(1, 0.5), 1);
        assert_eq!(recovered(2, 1.1, 10), 3);
    }

    #[test]
    fn config_validation() {
        assert!(AdaptiveConfig::default().validate().is_ok());
        let bad = AdaptiveConfig {
            reduce_factor: 1.5,
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }
}
