//! The per-resource accounting state: one algorithm per resource.
//!
//! Every algorithm works on integer nanoseconds since the limiter's epoch
//! ([`Nanos`]) handed in by the caller, never on a clock of its own, so the
//! same code runs under a manual clock, tokio's paused clock and real time.
//!
//! The contract every algorithm honours (checked by the property tests):
//! - `check` never mutates what a later `take` sees except for refill
//!   bookkeeping that does not change the answer;
//! - a `take` only follows a successful `check` at the same `now`;
//! - `Err(Some(wait))` from `check` means that, absent other takes, the same
//!   `check` at `now + wait` succeeds (never earlier than reported);
//! - `Err(None)` means the wait is not a matter of time (in-flight slots,
//!   or a cost above the current, reduced, maximum);
//! - `refund` never lifts what is available above the maximum;
//! - `debit` never takes what is available below minus one window's
//!   capacity: whatever a caller settles at, a resource owes at most one
//!   window, and so recovers within two (a settle far above what was
//!   reserved cannot lock a resource for everyone).

mod bucket;
mod in_flight;
mod sliding_window;

pub(crate) use bucket::{Bucket, Params};
pub(crate) use in_flight::InFlight;
pub(crate) use sliding_window::SlidingWindow;

use crate::limit::{Algorithm, Limit};

/// Nanoseconds since the limiter's epoch.
pub(crate) type Nanos = u64;

/// When a take happened: handed back to `refund` so that time-bucketed
/// algorithms return the tokens to the window they were taken from.
pub(crate) type Stamp = Nanos;

/// The answer to "may `cost` go now?": `Ok` yes; `Err(Some(n))` after `n`
/// nanoseconds; `Err(None)` not a matter of time.
pub(crate) type Check = Result<(), Option<Nanos>>;

/// The state of one resource under the algorithm its limit names.
#[derive(Debug)]
pub(crate) enum Meter {
    /// Token bucket and GCRA: the same admissions, one state.
    Bucket(Bucket),
    SlidingWindow(SlidingWindow),
    InFlight(InFlight),
}

macro_rules! dispatch {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            Meter::Bucket($m) => $e,
            Meter::SlidingWindow($m) => $e,
            Meter::InFlight($m) => $e,
        }
    };
}

impl Meter {
    /// A fresh, full meter for `limit` (which has been validated).
    pub(crate) fn new(limit: &Limit, now: Nanos) -> Self {
        match limit.kind() {
            Algorithm::TokenBucket | Algorithm::Gcra => Meter::Bucket(Bucket::new(limit)),
            Algorithm::SlidingWindow => Meter::SlidingWindow(SlidingWindow::new(limit, now)),
            Algorithm::InFlight => Meter::InFlight(InFlight::new(limit)),
        }
    }

    /// May `cost` be taken at `now`? `cost` may exceed the maximum (a queue's
    /// total ahead of a newcomer): the answer is then the estimated wait for
    /// it to drain.
    #[inline]
    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        dispatch!(self, m => m.check(now, cost))
    }

    /// Takes `cost`; only after a successful `check` at the same `now`.
    #[inline]
    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        dispatch!(self, m => m.take(now, cost))
    }

    /// [`Meter::take`] for a waiter that queued at `joined` (see
    /// [`bucket::Bucket::take_waiter`]); other meters hold no margin.
    #[inline]
    pub(crate) fn take_waiter(
        &mut self,
        now: Nanos,
        cost: u64,
        joined: Nanos,
        paused: Nanos,
    ) -> Stamp {
        match self {
            Meter::Bucket(b) => b.take_waiter(now, cost, joined, paused),
            m => m.take(now, cost),
        }
    }

    /// Gives back `amount` of what a take at `stamp` consumed (settle with a
    /// smaller actual cost). Never lifts availability above the maximum.
    pub(crate) fn refund(&mut self, now: Nanos, stamp: Stamp, amount: u64) {
        dispatch!(self, m => m.refund(now, stamp, amount))
    }

    /// Consumes `amount` more, even into debt (settle with a larger actual
    /// cost): later takes wait for the debt to be repaid. The debt stops at
    /// one window's capacity.
    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        dispatch!(self, m => m.debit(now, amount))
    }

    /// Forgets any debt: what is available becomes at least zero (an
    /// operator configured the resource anew).
    pub(crate) fn forgive_debt(&mut self, now: Nanos) {
        match self {
            Meter::Bucket(m) => m.forgive_debt(now),
            Meter::SlidingWindow(m) => m.forgive_debt(now),
            // Slots held are grants alive: nothing owed to forgive.
            Meter::InFlight(_) => {}
        }
    }

    /// Holds back up to `margin` nanoseconds of refill once at the start of
    /// each busy period: calls reach an upstream with some jitter, and the
    /// upstream's own bucket may stay full (wasting refill) that much
    /// longer than this one. Never per grant, so never the rate (see
    /// `Params::take`). Only token buckets and GCRA refill continuously;
    /// the others ignore it.
    pub(crate) fn set_margin(&mut self, margin: Nanos) {
        match self {
            Meter::Bucket(m) => m.set_margin(margin),
            Meter::SlidingWindow(_) | Meter::InFlight(_) => {}
        }
    }

    /// A grant that held `cost` is gone (only in-flight limits care).
    pub(crate) fn release(&mut self, cost: u64) {
        if let Meter::InFlight(m) = self {
            m.release(cost);
        }
    }

    /// What could be taken at `now` (may be negative while in debt).
    pub(crate) fn available(&mut self, now: Nanos) -> f64 {
        dispatch!(self, m => m.available(now))
    }

    /// Brings the meter in step with an upstream's own count: no more than
    /// `remaining` is available from `now` on.
    pub(crate) fn clamp_available(&mut self, now: Nanos, remaining: u64) {
        dispatch!(self, m => m.clamp_available(now, remaining))
    }

    /// Applies a new capacity/window/burst of the same algorithm, keeping the
    /// state: what is available is capped at the new maximum.
    pub(crate) fn reconfigure(&mut self, limit: &Limit, now: Nanos) {
        dispatch!(self, m => m.reconfigure(limit, now))
    }

    /// True when the meter is indistinguishable from a fresh one: dropping it
    /// and creating it again later loses nothing.
    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        dispatch!(self, m => m.is_idle(now))
    }
}

/// `a * b / c` rounded up, without overflow for any u64 inputs that fit the
/// result; saturates otherwise.
#[inline]
pub(crate) fn mul_div_ceil(a: u64, b: u64, c: u64) -> u64 {
    let n = a as u128 * b as u128;
    let c = c as u128;
    u64::try_from(n.div_ceil(c)).unwrap_or(u64::MAX)
}

/// `a * b / c` rounded down; saturates.
#[inline]
pub(crate) fn mul_div_floor(a: u64, b: u64, c: u64) -> u64 {
    let n = a as u128 * b as u128;
    u64::try_from(n / c as u128).unwrap_or(u64::MAX)
}
