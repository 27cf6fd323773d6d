//! The exact log of a small sliding window.

use std::collections::VecDeque;

use super::{Counters, DEBT_ENTRIES, align, expiry};
use crate::meter::{Nanos, Stamp};

/// The exact log: `(when, cost)` of the takes in the window, oldest first,
/// one entry per nanosecond, none of cost 0 (those that have left go at the
/// next record).
#[derive(Debug, Default)]
pub(super) struct Log {
    pub(super) entries: VecDeque<(Nanos, u64)>,
    /// The sum of the entries' costs, so that an admission costs a look at
    /// the expired prefix only. Recording stops at `u64::MAX`: a debt that
    /// large already blocks the whole window, as any debt above capacity.
    pub(super) total: u64,
}

impl Log {
    /// The entries still inside the window at `now`.
    pub(super) fn live(&self, now: Nanos, window: u64) -> impl Iterator<Item = &(Nanos, u64)> {
        self.entries
            .iter()
            .skip_while(move |(at, _)| expiry(*at, window) <= now)
    }

    pub(super) fn held(&self, now: Nanos, window: u64) -> u64 {
        let gone: u64 = self
            .entries
            .iter()
            .take_while(|(at, _)| expiry(*at, window) <= now)
            .map(|(_, c)| c)
            .sum();
        self.total - gone
    }

    /// The first instant the oldest entries have freed enough for `cost`.
    pub(super) fn wait(&self, now: Nanos, window: u64, capacity: u64, cost: u64) -> Nanos {
        let mut excess = self.held(now, window).saturating_sub(capacity - cost);
        if excess == 0 {
            return 0;
        }
        for &(at, c) in self.live(now, window) {
            if c >= excess {
                return expiry(at, window) - now;
            }
            excess -= c;
        }
        // Not reached (the live entries hold at least `excess`); once every
        // entry has left, anything up to the capacity fits.
        self.entries
            .back()
            .map_or(0, |&(at, _)| expiry(at, window).saturating_sub(now))
    }

    pub(super) fn prune(&mut self, now: Nanos, window: u64) {
        while let Some(&(at, c)) = self.entries.front() {
            if expiry(at, window) > now {
                break;
            }
            self.entries.pop_front();
            self.total -= c;
        }
    }

    /// Adds `cost` at `at`, in time order: a take can arrive a little late
    /// when callers read the clock before taking the lock.
    pub(super) fn record(&mut self, at: Nanos, cost: u64, capacity: u64) {
        let cost = cost.min(u64::MAX - self.total);
        if cost == 0 {
            return;
        }
        self.total += cost;
        let newest = self.entries.back().map(|(t, _)| *t);
        match newest {
            Some(t) if t >= at => match self.entries.binary_search_by_key(&at, |(t, _)| *t) {
                Ok(i) => self.entries[i].1 += cost,
                Err(i) => self.entries.insert(i, (at, cost)),
            },
            _ => self.entries.push_back((at, cost)),
        }
        self.bound(capacity);
    }

    /// Takes only follow a check, so their live entries (at least 1 each)
    /// number at most `capacity`; debits and clamps can add more. Past
    /// `capacity + DEBT_ENTRIES` the two oldest merge at the later one's
    /// time: that cost leaves the window later than it would have, never
    /// sooner, so the limit still holds (a refund to the older stamp is then
    /// lost, which errs the same way).
    pub(super) fn bound(&mut self, capacity: u64) {
        let max = usize::try_from(capacity)
            .unwrap_or(usize::MAX)
            .saturating_add(DEBT_ENTRIES);
        while self.entries.len() > max {
            let Some((_, c)) = self.entries.pop_front() else {
                break;
            };
            match self.entries.front_mut() {
                Some((_, next)) => *next += c,
                None => self.total -= c,
            }
        }
    }

    pub(super) fn refund(&mut self, stamp: Stamp, amount: u64) {
        let Ok(i) = self.entries.binary_search_by_key(&stamp, |(t, _)| *t) else {
            return;
        };
        let back = amount.min(self.entries[i].1);
        self.entries[i].1 -= back;
        self.total -= back;
        if self.entries[i].1 == 0 {
            self.entries.remove(i);
        }
    }

    /// The estimate's counters for the same takes: those in `now`'s aligned
    /// window and the one before (older ones have left the window).
    pub(super) fn binned(&self, now: Nanos, window: u64) -> Counters {
        let mut c = Counters::fresh(now, window);
        for &(at, cost) in &self.entries {
            let start = align(at, window);
            if start >= c.start {
                c.current = c.current.saturating_add(cost);
            } else if start.checked_add(window) == Some(c.start) {
                c.previous = c.previous.saturating_add(cost);
            }
        }
        c
    }
}
