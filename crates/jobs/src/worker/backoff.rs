//! Exponential backoff with full jitter.

use std::time::Duration;

/// Exponential backoff with full jitter: before attempt `n + 1` (after `n`
/// failed ones) wait a uniformly random time in
/// `[0, min(max, base · 2^(n-1))]`. Full jitter spreads the retries of
/// jobs that failed together (an upstream outage) instead of sending them
/// back in one wave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The ceiling after the first failure (the seed's 1 s).
    pub base: Duration,
    /// The largest ceiling.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The ceiling of the wait after `failures` failed attempts (at least 1).
    pub fn ceiling(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        self.base
            .checked_mul(1_u32 << doublings.min(31))
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// A random wait after `failures` failed attempts, drawn with `rng`.
    pub fn wait(&self, failures: u32, rng: &mut fastrand::Rng) -> Duration {
        let ceiling = self.ceiling(failures);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.u64(0..=nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_up_to_the_max() {
        let b = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        let ceilings: Vec<u64> = (1..=6).map(|n| b.ceiling(n).as_secs()).collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 10, 10]);
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(10));
        let mut rng = fastrand::Rng::with_seed(7);
        for n in 1..40 {
            assert!(b.wait(n, &mut rng) <= b.ceiling(n));
        }
    }
}
