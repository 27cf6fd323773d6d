//! Token bucket and GCRA: one state, a theoretical arrival time.
//!
//! A token bucket with continuous refill at `capacity / window`, holding at
//! most `burst`, admits exactly what the generic cell rate algorithm with
//! emission interval `window / capacity` and tolerance `burst` intervals
//! admits, so both algorithms share this state. Times are scaled by the
//! capacity (`t × capacity`), so that one cost unit's emission interval is
//! the integer `window` and the arithmetic is exact; a token bucket's level
//! (in `tokens × window`) is `tau − (tat − now)`, `tau` the burst's
//! intervals.
//!
//! The state is one `u128`, so that resources with nobody waiting can
//! update it with a compare-and-swap and no lock (see `resource/fast.rs`);
//! the arithmetic is written once, in [`Params`], for both paths.

use super::{Check, Nanos, Stamp};
use crate::limit::Limit;

/// What the arithmetic needs of a limit, and the jitter margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) capacity: u64,
    pub(crate) window: u64,
    pub(crate) burst: u64,
    /// Jitter margin in nanoseconds (see [`super::Meter::set_margin`]).
    pub(crate) margin: u64,
    /// `gcd(capacity, window)`, for the fast path's units (see
    /// `resource/fast.rs`); computed once, when the limit is set.
    pub(crate) unit: u64,
}

impl Params {
    #[inline]
    pub(crate) fn scaled(&self, now: Nanos) -> u128 {
        now as u128 * self.capacity as u128
    }

    /// The delay variation tolerance: a full burst, scaled.
    #[inline]
    pub(crate) fn tau(&self) -> u128 {
        self.burst as u128 * self.window as u128
    }

    #[inline]
    fn increment(&self, cost: u64) -> u128 {
        cost as u128 * self.window as u128
    }

    /// The arrival time after taking `cost` at `now` from `tat`, or how
    /// long to wait. `cost` may exceed the burst (a queue's total ahead of
    /// a newcomer): the answer is then the wait for it to drain.
    ///
    /// The jitter margin is held back once per busy period, never per
    /// grant: a bucket found full (`tat <= now`) has refilled for nothing
    /// since `tat`, and the upstream's own bucket, which calls reach up to
    /// the margin late, may have stayed full that much longer; so refill
    /// restarts here up to the margin later (never more than the bucket
    /// was idle, so a waiter woken a little late does not pay it). While
    /// the bucket is busy the margin costs nothing, so the sustained rate
    /// is the configured one whatever the margin. Where the burst leaves
    /// no room for it, the margin is taken from time, not tokens: a full
    /// bucket always lets its grant go, and the next waits it out.
    #[inline]
    pub(crate) fn take(&self, tat: u128, now: Nanos, cost: u64) -> Result<u128, Option<Nanos>> {
        self.take_holding(tat, now, cost, self.margin)
    }

    /// [`Params::take`] holding back at most `margin` (nanoseconds) of
    /// refill if the bucket is found full.
    #[inline]
    fn take_holding(
        &self,
        tat: u128,
        now: Nanos,
        cost: u64,
        margin: Nanos,
    ) -> Result<u128, Option<Nanos>> {
        let now_s = self.scaled(now);
        let inc = self.increment(cost);
        // Full for less than a nanosecond is not idle: a grant dated on the
        // nanosecond its token came due (rounded up) loses nothing.
        let (base, idle) = match now_s.saturating_sub(tat) {
            idle if idle < self.capacity as u128 => (tat, 0),
            idle => (now_s, idle),
        };
        let held = (margin as u128 * self.capacity as u128).min(idle);
        let new_tat = base + held + inc;
        let ready = now_s + self.tau();
        if new_tat <= ready || (tat <= now_s && inc <= self.tau()) {
            return Ok(new_tat);
        }
        let wait = (new_tat - ready).div_ceil(self.capacity as u128);
        Err(Some(u64::try_from(wait).unwrap_or(u64::MAX)))
    }

    /// The earliest time, in nanoseconds, from which taking `cost` from
    /// `tat` is allowed (a cost within the burst).
    #[inline]
    pub(crate) fn due(&self, tat: u128, cost: u64) -> Nanos {
        let at = (tat + self.increment(cost)).saturating_sub(self.tau());
        u64::try_from(at.div_ceil(self.capacity as u128)).unwrap_or(Nanos::MAX)
    }
}

#[derive(Debug)]
pub(crate) struct Bucket {
    pub(crate) params: Params,
    /// Theoretical arrival time, scaled by `capacity`.
    pub(crate) tat: u128,
}

impl Bucket {
    pub(crate) fn new(limit: &Limit) -> Self {
        let (capacity, window) = (limit.capacity(), limit.window_nanos());
        let params = Params {
            capacity,
            window,
            burst: limit.effective_burst(),
            margin: 0,
            unit: gcd(capacity, window).max(1),
        };
        // Full, and idle since ever: the first busy period holds its
        // margin back like any other.
        Bucket { tat: 0, params }
    }

    pub(crate) fn set_margin(&mut self, margin: Nanos) {
        self.params.margin = margin;
    }

    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        self.params.take(self.tat, now, cost).map(drop)
    }

    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        match self.params.take(self.tat, now, cost) {
            Ok(tat) => self.tat = tat,
            // Not reached: a take follows a check that allowed it.
            Err(_) => self.debit(now, cost),
        }
        now
    }

    /// A take for a waiter that joined the queue at `joined`, before any
    /// `paused` until: if the bucket filled up only after it joined, the
    /// busy period never ended (demand waited all along; the serving
    /// thread came late), so the margin is not held again. Held again
    /// at every such restart, it cost the rate whenever the machine
    /// stalled the serving thread for longer than the burst lasts.
    pub(crate) fn take_waiter(
        &mut self,
        now: Nanos,
        cost: u64,
        joined: Nanos,
        paused: Nanos,
    ) -> Stamp {
        let full_at = u64::try_from(self.tat / self.params.capacity as u128).unwrap_or(Nanos::MAX);
        let margin = if joined <= full_at && paused <= full_at {
            0
        } else {
            self.params.margin
        };
        match self.params.take_holding(self.tat, now, cost, margin) {
            Ok(tat) => self.tat = tat,
            Err(_) => self.debit(now, cost),
        }
        now
    }

    pub(crate) fn refund(&mut self, now: Nanos, _stamp: Stamp, amount: u64) {
        // Not below now: that would be more than a full burst.
        let now_s = self.params.scaled(now);
        self.tat = self
            .tat
            .saturating_sub(self.params.increment(amount))
            .max(now_s);
    }

    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        let p = &self.params;
        let now_s = p.scaled(now);
        let tat = self.tat.max(now_s).saturating_add(p.increment(amount));
        // At most one window's capacity in debt: a full burst plus a
        // window's worth of emission intervals ahead of now (or where it
        // was already).
        let deepest = now_s + p.tau() + p.capacity as u128 * p.window as u128;
        self.tat = tat.min(deepest.max(self.tat));
    }

    pub(crate) fn forgive_debt(&mut self, now: Nanos) {
        self.tat = self.tat.min(self.params.scaled(now) + self.params.tau());
    }

    /// What is available, in `tokens × window` (a token bucket's level).
    fn level(&self, now: Nanos) -> i128 {
        let now_s = self.params.scaled(now);
        let used = self.tat.max(now_s) - now_s;
        self.params.tau() as i128 - used as i128
    }

    pub(crate) fn available(&mut self, now: Nanos) -> f64 {
        self.level(now) as f64 / self.params.window as f64
    }

    pub(crate) fn clamp_available(&mut self, now: Nanos, remaining: u64) {
        let p = &self.params;
        let floor = (p.scaled(now) + p.tau()).saturating_sub(p.increment(remaining));
        self.tat = self.tat.max(floor);
    }

    pub(crate) fn reconfigure(&mut self, limit: &Limit, now: Nanos) {
        // Keep what is available (or owed), in the new units, capped at the
        // new burst and at one new window of debt: a reduction never hands
        // out more than the new maximum, a raise adds nothing.
        let level = self.level(now);
        let margin = self.params.margin;
        let mut next = Bucket::new(limit);
        next.params.margin = margin;
        let p = &next.params;
        let (new, old) = (p.window as i128, self.params.window as i128);
        let level = match level.checked_mul(new) {
            Some(scaled) => scaled / old,
            // Huge levels (near MAX_CAPACITY over a long window): a
            // fraction of a token lost is nothing there.
            None => (level / old).saturating_mul(new),
        };
        let deepest = -(p.capacity as i128 * p.window as i128);
        let level = level.min(p.tau() as i128).max(deepest);
        next.tat = (p.scaled(now) as i128 + p.tau() as i128 - level) as u128;
        *self = next;
    }

    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        self.tat <= self.params.scaled(now)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: u64 = 1_000_000_000;

    fn take(b: &mut Bucket, now: Nanos, n: usize) {
        for _ in 0..n {
            assert!(b.check(now, 1).is_ok());
            b.take(now, 1);
        }
    }

    #[test]
    fn burst_then_emission_interval() {
        let mut b = Bucket::new(&Limit::per_second(3).burst(10));
        take(&mut b, 0, 10);
        // One token comes every 1/3 s, rounded up to the nanosecond.
        assert_eq!(b.check(0, 1), Err(Some(333_333_334)));
        assert!(b.check(333_333_333, 1).is_err());
        assert!(b.check(333_333_334, 1).is_ok());
    }

    #[test]
    fn fractional_rate() {
        // 2.5 per second as 5 per 2 s, burst 1.
        let mut b = Bucket::new(&Limit::new(5, Duration::from_secs(2)).burst(1));
        b.take(0, 1);
        assert_eq!(b.check(0, 1), Err(Some(400_000_000)));
    }

    fn with_margin(limit: Limit, margin: Nanos) -> Bucket {
        let mut b = Bucket::new(&limit);
        b.set_margin(margin);
        b
    }

    #[test]
    fn margin_held_back_once_per_busy_period() {
        let mut b = with_margin(Limit::per_second(50).burst(10), 10_000_000);
        // Idle: half a token held back, so nine go at once, the tenth
        // 10 ms later.
        take(&mut b, S, 9);
        assert_eq!(b.check(S, 1), Err(Some(10_000_000)));
        b.take(S + 10_000_000, 1);
        // Then one every 20 ms: the margin is not held again while busy.
        assert_eq!(b.check(S + 10_000_000, 1), Err(Some(20_000_000)));
        for i in 1..=100 {
            let at = S + 10_000_000 + i * 20_000_000;
            assert!(b.check(at - 1, 1).is_err());
            b.take(at, 1);
        }
        // Idle for 5 ms (less than the margin) after the bucket filled up:
        // 5 ms held back, not the whole margin.
        let full = S + 10_000_000 + 100 * 20_000_000 + 200_000_000;
        take(&mut b, full + 5_000_000, 9);
        assert_eq!(b.check(full + 5_000_000, 1), Err(Some(5_000_000)));
    }

    #[test]
    fn margin_without_room_is_taken_from_time() {
        // 1,000/s burst 10 with a 20 ms margin: no room in the burst.
        let mut b = with_margin(Limit::per_second(1_000).burst(10), 20_000_000);
        // A full bucket lets its grant go; the refill restarts 20 ms on,
        // so the next waits 12 ms (the margin less the nine the burst
        // holds) …
        take(&mut b, S, 1);
        assert_eq!(b.check(S, 1), Err(Some(12_000_000)));
        // … and from then on the rate is the configured one: 1,000 in 1 s.
        let mut n = 0;
        let mut now = S + 12_000_000;
        while now < S + 12_000_000 + S {
            match b.check(now, 1) {
                Ok(()) => {
                    b.take(now, 1);
                    n += 1;
                }
                Err(w) => now += w.unwrap(),
            }
        }
        assert_eq!(n, 1_000);
        let mut one = with_margin(Limit::per_second(5).burst(1), 10_000_000);
        assert!(one.check(S, 1).is_ok(), "a full bucket lets its grant go");
        one.take(S, 1);
        assert_eq!(one.check(S, 1), Err(Some(210_000_000)));
    }

    #[test]
    fn due_is_the_first_nanosecond_allowed() {
        let mut b = Bucket::new(&Limit::per_second(3).burst(2));
        take(&mut b, S, 2);
        let due = b.params.due(b.tat, 1);
        assert_eq!(due, S + 333_333_334);
        assert!(b.check(due - 1, 1).is_err());
        assert!(b.check(due, 1).is_ok());
    }

    #[test]
    fn refund_caps_at_burst_and_debit_makes_debt() {
        let mut b = Bucket::new(&Limit::per_second(2).burst(2));
        let s = b.take(0, 2);
        b.refund(0, s, 5);
        assert_eq!(b.available(0), 2.0);
        assert!(b.is_idle(0));
        b.debit(0, 4);
        assert_eq!(b.available(0), -2.0);
        assert_eq!(b.check(0, 1), Err(Some(3 * S / 2)));
    }

    #[test]
    fn debt_stops_at_one_window() {
        let mut b = Bucket::new(&Limit::gcra(3, Duration::from_secs(1)).burst(10));
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
        let mut b = Bucket::new(&Limit::per_second(100));
        b.reconfigure(&Limit::per_second(50), 0);
        assert_eq!(b.available(0), 50.0);
        b.reconfigure(&Limit::per_second(100), 0);
        assert_eq!(b.available(0), 50.0, "raising the limit adds no tokens");
        assert!(!b.is_idle(0));
        assert!(b.is_idle(S / 2));
        b.debit(0, 1_000);
        b.reconfigure(&Limit::new(10, Duration::from_secs(2)), 0);
        assert_eq!(b.available(0), -10.0, "debt kept, at most one window");
    }

    #[test]
    fn clamp_follows_upstream() {
        let mut b = Bucket::new(&Limit::per_second(10));
        b.clamp_available(0, 3);
        assert_eq!(b.available(0), 3.0);
    }
}
