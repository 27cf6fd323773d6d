//! Adaptive control: cut capacity on an upstream 429, pause until its
//! Retry-After, and recover gradually (AIMD).

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
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            reduce_factor: 0.5,
            recovery_factor: 1.1,
            recovery_interval: Duration::from_secs(30),
            max_pause: Duration::from_secs(60),
            cooldown: None,
        }
    }
}

impl AdaptiveConfig {
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
        if self.recovery_interval.is_zero() {
            return Err(Error::InvalidWindow(self.recovery_interval));
        }
        Ok(())
    }
}

/// Why a resource's capacity changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeReason {
    /// An upstream answered 429.
    Throttled,
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
}

/// Per-resource adaptive state; boxed and absent until the first 429.
#[derive(Debug, Clone)]
pub(crate) struct Adaptive {
    /// What the rules or an operator configured: recovery's ceiling.
    pub(crate) configured: crate::Limit,
    pub(crate) reduced_at: Option<Nanos>,
    pub(crate) next_recovery: Nanos,
    pub(crate) paused_until: Nanos,
}

impl Adaptive {
    pub(crate) fn new(configured: crate::Limit) -> Self {
        Adaptive {
            configured,
            reduced_at: None,
            next_recovery: Nanos::MAX,
            paused_until: 0,
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
