//! The rate an upstream's rate-limit headers announce.
//!
//! Providers that refill continuously (OpenAI's `x-ratelimit-*`,
//! Anthropic's `anthropic-ratelimit-*`) answer every call with the most
//! their bucket holds (`limit`, `L`), what is left of it (`remaining`, `n`,
//! rounded down) and how long until it is full again (`reset`, `t`). So the
//! bucket refills `L − x` in `t`, where `x` is what it really held: at
//! least `n`, less than `n + 1`, and after a call it admitted at most
//! `L − 1`. One answer thus bounds the rate to an interval; answers with
//! different fractions narrow it, and one that finds the bucket full but for
//! the call itself (`n = L − 1`) gives it exactly. The IETF
//! `RateLimit-Policy` states it outright: `q` per `w` seconds.
//!
//! The intervals of recent answers are intersected; when a new one does not
//! meet the intersection the upstream changed its limit, and counting
//! starts again from that answer.

use std::time::Duration;

use crate::headers::Quota;
use crate::meter::Nanos;

/// Answers older than this no longer narrow the estimate.
const FRESH: Nanos = 5_000_000_000;

/// Answers needed before the estimate is acted on.
pub(crate) const SAMPLES: u32 = 3;

/// The announced rate, per second, as an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Estimate {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    /// The upstream's burst (`limit`) in the answers counted.
    pub(crate) burst: u64,
    pub(crate) samples: u32,
    since: Nanos,
    pub(crate) last: Nanos,
}

/// What one answer says of the rate, per second: `(lo, hi)`.
///
/// `admitted` says whether the upstream took this call from its bucket.
pub(crate) fn bounds(quota: &Quota, admitted: bool) -> Option<(f64, f64)> {
    let (limit, n, reset) = (quota.limit?, quota.remaining?, quota.reset?);
    if limit == 0 || n >= limit || reset.is_zero() {
        return None;
    }
    let x_hi = if admitted {
        (n + 1).min(limit - 1)
    } else {
        (n + 1).min(limit)
    };
    let t = reset.as_secs_f64();
    // Resets are written to the millisecond at best, rounded up (a client
    // that waits for it must find the bucket full): the true one is a
    // little shorter, by up to a millisecond.
    let lo = (limit - x_hi) as f64 / (t * 1.002);
    let hi = (limit - n) as f64 / (t - 0.001 - t * 0.005).max(1e-6);
    Some((lo, hi))
}

/// `q` per `w`: exact, but for the rounding of `w` to whole seconds.
pub(crate) fn policy_bounds(limit: u64, window: Duration) -> Option<(f64, f64)> {
    let w = window.as_secs_f64();
    (limit > 0 && w > 0.0).then(|| (limit as f64 / (w + 0.5), limit as f64 / w))
}

impl Estimate {
    /// Counts one answer's interval; a new count starts when it does not
    /// meet the current one, or the current one is stale.
    pub(crate) fn add(&mut self, now: Nanos, (lo, hi): (f64, f64), burst: u64) {
        let stale = now.saturating_sub(self.last) > FRESH;
        if self.samples == 0 || stale || lo > self.hi || hi < self.lo || burst != self.burst {
            *self = Estimate {
                lo,
                hi,
                burst,
                samples: 1,
                since: now,
                last: now,
            };
            return;
        }
        self.lo = self.lo.max(lo);
        self.hi = self.hi.min(hi);
        self.samples += 1;
        self.last = now;
    }

    /// True while answers keep coming: the count is worth keeping.
    pub(crate) fn fresh(&self, now: Nanos) -> bool {
        self.samples > 0 && now.saturating_sub(self.last) <= FRESH
    }

    /// True once enough recent answers agree.
    pub(crate) fn ready(&self, now: Nanos) -> bool {
        self.samples >= SAMPLES && self.fresh(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(limit: u64, remaining: u64, reset_ms: u64) -> Quota {
        Quota {
            limit: Some(limit),
            remaining: Some(remaining),
            reset: Some(Duration::from_millis(reset_ms)),
        }
    }

    #[test]
    fn a_bucket_full_but_for_the_call_gives_the_rate() {
        // 50/s, burst 10: one call from a full bucket, full again in 20 ms.
        let (lo, hi) = bounds(&q(10, 9, 20), true).unwrap();
        assert!(lo <= 50.0 && 50.0 <= hi, "{lo} {hi}");
        assert!(hi / lo < 1.15, "{lo} {hi}");
    }

    #[test]
    fn answers_with_different_fractions_narrow_it() {
        // 30/s, burst 10, drained: 0.3 and 0.9 tokens held.
        let mut e = Estimate::default();
        for (i, x) in [0.3_f64, 0.9, 0.6].into_iter().enumerate() {
            let reset = ((10.0 - x) / 30.0 * 1000.0).ceil() as u64;
            let b = bounds(&q(10, 0, reset), false).unwrap();
            assert!(b.0 <= 30.0 && 30.0 <= b.1, "{b:?}");
            e.add(i as u64, b, 10);
        }
        assert!(e.ready(2));
        assert!(e.lo > 29.0 && e.hi < 31.5, "{e:?}");
    }

    #[test]
    fn a_changed_limit_starts_a_new_count() {
        let mut e = Estimate::default();
        e.add(0, (49.0, 51.0), 10);
        e.add(1, (49.5, 52.0), 10);
        e.add(2, (24.0, 26.0), 10);
        assert_eq!((e.samples, e.lo, e.hi), (1, 24.0, 26.0));
        e.add(FRESH * 3, (20.0, 30.0), 10);
        assert_eq!(e.samples, 1, "stale");
    }

    #[test]
    fn nothing_from_a_full_bucket_or_no_reset() {
        assert_eq!(bounds(&q(10, 10, 0), true), None);
        assert_eq!(bounds(&q(10, 3, 0), true), None);
        assert!(policy_bounds(100, Duration::from_secs(60)).is_some());
    }
}
