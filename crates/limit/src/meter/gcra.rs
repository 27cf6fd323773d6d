//! The generic cell rate algorithm: one timestamp per resource.
//!
//! Times are scaled by the capacity (`t × capacity`) so that one cost unit's
//! emission interval, `window / capacity`, is the integer `window` and the
//! arithmetic is exact.

use super::{Check, Nanos, Stamp};
use crate::limit::Limit;

#[derive(Debug)]
pub(crate) struct Gcra {
    /// Theoretical arrival time, scaled by `capacity`.
    tat: u128,
    capacity: u64,
    window: u64,
    burst: u64,
    /// Jitter margin in nanoseconds (see [`super::Meter::set_margin`]).
    margin: u64,
}

impl Gcra {
    pub(crate) fn new(limit: &Limit, now: Nanos) -> Self {
        Gcra {
            tat: now as u128 * limit.capacity() as u128,
            capacity: limit.capacity(),
            window: limit.window_nanos(),
            burst: limit.effective_burst(),
            margin: 0,
        }
    }

    pub(crate) fn set_margin(&mut self, margin: Nanos) {
        self.margin = margin;
    }

    fn scaled(&self, now: Nanos) -> u128 {
        now as u128 * self.capacity as u128
    }

    /// The delay variation tolerance: a full burst, scaled.
    fn tau(&self) -> u128 {
        self.burst as u128 * self.window as u128
    }

    fn increment(&self, cost: u64) -> u128 {
        cost as u128 * self.window as u128
    }

    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        let now_s = self.scaled(now);
        let new_tat = self.tat.max(now_s) + self.increment(cost);
        // The margin, scaled, where the burst leaves room for it.
        let room = self.tau().saturating_sub(self.increment(cost));
        let margin = (self.margin as u128 * self.capacity as u128).min(room);
        // Allowed at `new_tat + margin - tau`, compared without underflow.
        let allowed_at = new_tat + margin;
        let ready = now_s + self.tau();
        if allowed_at <= ready {
            return Ok(());
        }
        let wait = (allowed_at - ready).div_ceil(self.capacity as u128);
        Err(Some(u64::try_from(wait).unwrap_or(u64::MAX)))
    }

    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.debit(now, cost);
        now
    }

    pub(crate) fn refund(&mut self, now: Nanos, _stamp: Stamp, amount: u64) {
        // Not below now: that would be more than a full burst.
        let now_s = self.scaled(now);
        self.tat = self.tat.saturating_sub(self.increment(amount)).max(now_s);
    }

    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        let now_s = self.scaled(now);
        let tat = self.tat.max(now_s).saturating_add(self.increment(amount));
        // At most one window's capacity in debt: a full burst plus a
        // window's worth of emission intervals ahead of now (or where it
        // was already).
        let deepest = now_s + self.tau() + self.capacity as u128 * self.window as u128;
        self.tat = tat.min(deepest.max(self.tat));
    }

    pub(crate) fn forgive_debt(&mut self, now: Nanos) {
        let now_s = self.scaled(now);
        self.tat = self.tat.min(now_s + self.tau());
    }

    pub(crate) fn available(&mut self, now: Nanos) -> f64 {
        let now_s = self.scaled(now);
        let used = self.tat.max(now_s) - now_s;
        (self.tau() as f64 - used as f64) / self.window as f64
    }

    pub(crate) fn clamp_available(&mut self, now: Nanos, remaining: u64) {
        let now_s = self.scaled(now);
        let floor = (now_s + self.tau()).saturating_sub(self.increment(remaining));
        self.tat = self.tat.max(floor);
    }

    pub(crate) fn reconfigure(&mut self, limit: &Limit, now: Nanos) {
        // Carry over what was available, in tokens, capped at the new burst
        // and at one new window of debt.
        let available = self
            .available(now)
            .min(limit.effective_burst() as f64)
            .max(-(limit.capacity() as f64));
        let margin = self.margin;
        *self = Gcra::new(limit, now);
        self.margin = margin;
        let used = (self.burst as f64 - available).max(0.0);
        let used_s = (used * self.window as f64).ceil() as u128;
        self.tat = self.scaled(now) + used_s;
    }

    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        self.tat <= self.scaled(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_emission_interval() {
        let mut g = Gcra::new(
            &Limit::gcra(3, std::time::Duration::from_secs(1)).burst(10),
            0,
        );
        for _ in 0..10 {
            assert!(g.check(0, 1).is_ok());
            g.take(0, 1);
        }
        assert_eq!(g.check(0, 1), Err(Some(333_333_334)));
        assert!(g.check(333_333_333, 1).is_err());
        assert!(g.check(333_333_334, 1).is_ok());
    }

    #[test]
    fn margin_delays_only_the_refill() {
        let mut g = Gcra::new(
            &Limit::gcra(50, std::time::Duration::from_secs(1)).burst(10),
            0,
        );
        g.set_margin(10_000_000);
        for _ in 0..9 {
            assert!(g.check(0, 1).is_ok());
            g.take(0, 1);
        }
        assert_eq!(g.check(0, 1), Err(Some(10_000_000)));
        g.take(10_000_000, 1);
        assert_eq!(g.check(10_000_000, 1), Err(Some(20_000_000)));
    }

    #[test]
    fn refund_never_exceeds_burst() {
        let mut g = Gcra::new(
            &Limit::gcra(1, std::time::Duration::from_secs(1)).burst(2),
            0,
        );
        let s = g.take(0, 1);
        g.refund(0, s, 10);
        assert_eq!(g.available(0), 2.0);
        assert!(g.is_idle(0));
    }

    #[test]
    fn debt_stops_at_one_window() {
        let mut g = Gcra::new(
            &Limit::gcra(3, std::time::Duration::from_secs(1)).burst(10),
            0,
        );
        g.debit(0, u64::MAX);
        assert_eq!(g.available(0), -3.0);
        g.forgive_debt(0);
        assert_eq!(g.available(0), 0.0);
    }

    #[test]
    fn reconfigure_and_clamp() {
        let mut g = Gcra::new(&Limit::gcra(100, std::time::Duration::from_secs(1)), 0);
        g.reconfigure(&Limit::gcra(50, std::time::Duration::from_secs(1)), 0);
        assert_eq!(g.available(0), 50.0);
        g.clamp_available(0, 5);
        assert_eq!(g.available(0), 5.0);
    }
}
