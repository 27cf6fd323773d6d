//! Token bucket with continuous refill, in exact integer arithmetic.
//!
//! The level is kept in "token-nanoseconds per window" (`tokens × window`),
//! so a refill of `elapsed` nanoseconds adds exactly `elapsed × capacity`
//! and no rounding can admit a fraction of a token early.

use super::{Check, Nanos, Stamp};
use crate::limit::Limit;

#[derive(Debug)]
pub(crate) struct TokenBucket {
    /// `tokens × window`; negative while in debt.
    level: i128,
    /// When `level` was last brought up to date.
    last: Nanos,
    capacity: u64,
    window: u64,
    burst: u64,
    /// Jitter margin: nanoseconds of refill held back before a grant (see
    /// [`super::Meter::set_margin`]).
    margin: u64,
}

impl TokenBucket {
    pub(crate) fn new(limit: &Limit, now: Nanos) -> Self {
        let window = limit.window_nanos();
        let burst = limit.effective_burst();
        TokenBucket {
            level: burst as i128 * window as i128,
            last: now,
            capacity: limit.capacity(),
            window,
            burst,
            margin: 0,
        }
    }

    pub(crate) fn set_margin(&mut self, margin: Nanos) {
        self.margin = margin;
    }

    /// What must be in the bucket for `cost` to go: the cost, plus the
    /// margin's refill where the burst leaves room for it (a full bucket
    /// always lets its largest grant go).
    fn need(&self, cost: u64) -> i128 {
        let cost = cost as i128 * self.window as i128;
        let room = (self.max_level() - cost).max(0);
        cost + (self.margin as i128 * self.capacity as i128).min(room)
    }

    fn max_level(&self) -> i128 {
        self.burst as i128 * self.window as i128
    }

    /// The deepest debt: one window's capacity.
    fn min_level(&self) -> i128 {
        -(self.capacity as i128 * self.window as i128)
    }

    fn refill(&mut self, now: Nanos) {
        if now > self.last {
            let added = (now - self.last) as i128 * self.capacity as i128;
            self.level = (self.level.saturating_add(added)).min(self.max_level());
            self.last = now;
        }
    }

    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        self.refill(now);
        let need = self.need(cost);
        if self.level >= need {
            return Ok(());
        }
        let missing = need - self.level;
        let cap = self.capacity as i128;
        let wait = (missing + cap - 1) / cap;
        Err(Some(u64::try_from(wait).unwrap_or(u64::MAX)))
    }

    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.refill(now);
        self.level -= cost as i128 * self.window as i128;
        now
    }

    pub(crate) fn refund(&mut self, now: Nanos, _stamp: Stamp, amount: u64) {
        self.refill(now);
        let back = amount as i128 * self.window as i128;
        self.level = self.level.saturating_add(back).min(self.max_level());
    }

    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        self.refill(now);
        let level = self
            .level
            .saturating_sub(amount as i128 * self.window as i128);
        self.level = level.max(self.min_level().min(self.level));
    }

    pub(crate) fn forgive_debt(&mut self, now: Nanos) {
        self.refill(now);
        self.level = self.level.max(0);
    }

    pub(crate) fn available(&mut self, now: Nanos) -> f64 {
        self.refill(now);
        self.level as f64 / self.window as f64
    }

    pub(crate) fn clamp_available(&mut self, now: Nanos, remaining: u64) {
        self.refill(now);
        self.level = self.level.min(remaining as i128 * self.window as i128);
    }

    pub(crate) fn reconfigure(&mut self, limit: &Limit, now: Nanos) {
        self.refill(now);
        let window = limit.window_nanos();
        // Keep what is available (or owed), in the new units, capped at the
        // new burst: a reduction never hands out more than the new maximum.
        let level = self.level * window as i128 / self.window as i128;
        self.capacity = limit.capacity();
        self.window = window;
        self.burst = limit.effective_burst();
        self.level = level.min(self.max_level()).max(self.min_level());
    }

    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        self.refill(now);
        self.level >= self.max_level()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: u64 = 1_000_000_000;

    #[test]
    fn burst_then_refill_at_rate() {
        let mut b = TokenBucket::new(&Limit::per_second(3).burst(10), 0);
        for _ in 0..10 {
            assert!(b.check(0, 1).is_ok());
            b.take(0, 1);
        }
        // One token comes every 1/3 s, rounded up to the nanosecond.
        assert_eq!(b.check(0, 1), Err(Some(333_333_334)));
        assert!(b.check(333_333_333, 1).is_err());
        assert!(b.check(333_333_334, 1).is_ok());
    }

    #[test]
    fn fractional_rate() {
        // 2.5 per second as 5 per 2 s, burst 1.
        let mut b = TokenBucket::new(&Limit::new(5, Duration::from_secs(2)).burst(1), 0);
        b.take(0, 1);
        assert_eq!(b.check(0, 1), Err(Some(400_000_000)));
    }

    #[test]
    fn refund_caps_at_burst_and_debit_makes_debt() {
        let mut b = TokenBucket::new(&Limit::per_second(2).burst(2), 0);
        let s = b.take(0, 2);
        b.refund(0, s, 5);
        assert_eq!(b.available(0), 2.0);
        b.debit(0, 4);
        assert_eq!(b.available(0), -2.0);
        assert_eq!(b.check(0, 1), Err(Some(3 * S / 2)));
    }

    #[test]
    fn debt_stops_at_one_window() {
        let mut b = TokenBucket::new(&Limit::per_second(3).burst(10), 0);
        b.debit(0, u64::MAX);
        assert_eq!(b.available(0), -3.0);
        // Repaid within one window, full again after the burst's refill.
        assert_eq!(b.check(0, 1), Err(Some(S + 333_333_334)));
        b.debit(0, 5);
        assert_eq!(b.available(0), -3.0);
        b.forgive_debt(0);
        assert_eq!(b.available(0), 0.0);
    }

    #[test]
    fn reconfigure_caps_available() {
        let mut b = TokenBucket::new(&Limit::per_second(100), 0);
        b.reconfigure(&Limit::per_second(50), 0);
        assert_eq!(b.available(0), 50.0);
        b.reconfigure(&Limit::per_second(100), 0);
        assert_eq!(b.available(0), 50.0, "raising the limit adds no tokens");
        assert!(!b.is_idle(0));
        assert!(b.is_idle(S / 2));
    }

    #[test]
    fn margin_holds_back_refill_but_never_a_whole_burst() {
        let mut b = TokenBucket::new(&Limit::per_second(50).burst(10), 0);
        b.set_margin(10_000_000);
        // Half a token held back: nine go at once, the tenth 10 ms later.
        for _ in 0..9 {
            assert!(b.check(0, 1).is_ok());
            b.take(0, 1);
        }
        assert_eq!(b.check(0, 1), Err(Some(10_000_000)));
        b.take(10_000_000, 1);
        // Then one every 20 ms, each 10 ms after its token refilled.
        assert_eq!(b.check(10_000_000, 1), Err(Some(20_000_000)));
        assert!(b.check(30_000_000, 1).is_ok());
        let mut one = TokenBucket::new(&Limit::per_second(5).burst(1), 0);
        one.set_margin(10_000_000);
        assert!(
            one.check(0, 1).is_ok(),
            "no room for a margin in a burst of 1"
        );
    }

    #[test]
    fn clamp_follows_upstream() {
        let mut b = TokenBucket::new(&Limit::per_second(10), 0);
        b.clamp_available(0, 3);
        assert_eq!(b.available(0), 3.0);
    }
}
