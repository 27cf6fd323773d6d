//! In-flight (concurrency) limit: a grant holds its cost until dropped.

use super::{Check, Nanos, Stamp};
use crate::limit::Limit;

#[derive(Debug)]
pub(crate) struct InFlight {
    held: u64,
    capacity: u64,
}

impl InFlight {
    pub(crate) fn new(limit: &Limit) -> Self {
        InFlight {
            held: 0,
            capacity: limit.capacity(),
        }
    }

    /// Waiting for a slot is not a matter of time: it ends when a grant is
    /// released, which wakes the head waiter.
    pub(crate) fn check(&mut self, _now: Nanos, cost: u64) -> Check {
        if self.held.saturating_add(cost) <= self.capacity {
            Ok(())
        } else {
            Err(None)
        }
    }

    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.held = self.held.saturating_add(cost);
        now
    }

    pub(crate) fn release(&mut self, cost: u64) {
        self.held = self.held.saturating_sub(cost);
    }

    pub(crate) fn refund(&mut self, _now: Nanos, _stamp: Stamp, amount: u64) {
        self.release(amount);
    }

    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        self.take(now, amount);
    }

    pub(crate) fn available(&mut self, _now: Nanos) -> f64 {
        self.capacity as f64 - self.held as f64
    }

    /// Upstreams report rates, not our concurrency: nothing to align.
    pub(crate) fn clamp_available(&mut self, _now: Nanos, _remaining: u64) {}

    pub(crate) fn reconfigure(&mut self, limit: &Limit, _now: Nanos) {
        self.capacity = limit.capacity();
    }

    pub(crate) fn is_idle(&mut self, _now: Nanos) -> bool {
        self.held == 0
    }
}
