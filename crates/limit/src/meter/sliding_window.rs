//! Sliding window: at most `capacity` in any `window`, a window ending at `t`
//! being the half-open interval `(t − window, t]`.
//!
//! Small capacities (up to [`EXACT_WINDOW_MAX`]) keep an exact log of takes,
//! so a refusal's wait is the instant the oldest takes leave the window, to
//! the nanosecond. Large capacities keep the two-counter estimate instead:
//! constant memory where a log would hold thousands of entries, at the price
//! of the bound documented on [`Counters`].
//!
//! `check` never stores anything: the limiter also asks it about future
//! instants (the wait of a queue behind a pause), and forgetting takes that
//! have left the window *then* would admit too much *now*. Expired takes are
//! dropped by the calls that record, which the limiter makes at the present.

use std::collections::VecDeque;

use super::{Check, Nanos, Stamp};
use crate::limit::{EXACT_WINDOW_MAX, Limit};
use counters::Counters;
use log::Log;

mod counters;
mod log;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// Entries the exact log may hold beyond `capacity` (debits and clamps)
/// before the oldest are merged.
const DEBT_ENTRIES: usize = 16;

/// The state of one sliding-window resource.
///
/// Small on purpose (checked by a test): the limiter may hold a million idle
/// ones, and an empty log allocates nothing.
#[derive(Debug)]
pub(crate) struct SlidingWindow {
    capacity: u64,
    /// In nanoseconds, at least 1.
    window: u64,
    state: State,
}

/// Chosen by capacity: the log for `capacity <= EXACT_WINDOW_MAX`.
#[derive(Debug)]
enum State {
    Exact(Log),
    Estimate(Counters),
}

impl SlidingWindow {
    /// Nothing taken yet.
    pub(crate) fn new(limit: &Limit, now: Nanos) -> Self {
        let capacity = limit.capacity();
        let window = limit.window_nanos();
        let state = if capacity <= EXACT_WINDOW_MAX {
            State::Exact(Log::default())
        } else {
            State::Estimate(Counters::fresh(now, window))
        };
        SlidingWindow {
            capacity,
            window,
            state,
        }
    }

    /// Ok if `cost` more keeps every window within `capacity`; otherwise the
    /// exact wait, absent other takes. A `cost` above the capacity (a queue
    /// ahead of a newcomer) gets the time for it to drain: the part that
    /// does not fill whole windows, then one window per full capacity.
    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        if self.capacity == 0 {
            // Unreachable through a validated limit; nothing could ever pass.
            return Err(None);
        }
        if cost <= self.capacity {
            return match self.wait(now, cost) {
                0 => Ok(()),
                wait => Err(Some(wait)),
            };
        }
        let whole = (cost - 1) / self.capacity;
        let rest = cost - whole * self.capacity;
        let wait = self.wait(now, rest);
        Err(Some(wait.saturating_add(whole.saturating_mul(self.window))))
    }

    /// Nanoseconds until `cost <= capacity` fits, 0 if it fits now.
    fn wait(&self, now: Nanos, cost: u64) -> Nanos {
        match &self.state {
            State::Exact(log) => log.wait(now, self.window, self.capacity, cost),
            State::Estimate(c) => {
                c.at(now, self.window)
                    .wait(now, self.window, self.capacity, cost)
            }
        }
    }

    /// Records `cost` at `now`; the stamp tells `refund` which entry (or
    /// aligned window) to give back to.
    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.debit(now, cost);
        now
    }

    /// Gives back to the take made at `stamp`, not to the newest one:
    /// shrinking a newer entry would understate what the window holds once
    /// the older take has left. Nothing happens once it has left already.
    pub(crate) fn refund(&mut self, now: Nanos, stamp: Stamp, amount: u64) {
        self.prune(now);
        match &mut self.state {
            State::Exact(log) => log.refund(stamp, amount),
            State::Estimate(c) => c.refund(stamp, amount, self.window),
        }
    }

    /// Records `amount` at `now` whatever the capacity: later checks wait
    /// until it leaves the window.
    pub(crate) fn debit(&mut self, now: Nanos, amount: u64) {
        self.prune(now);
        // At most one window's capacity in debt: twice the capacity held.
        let most = self.capacity.saturating_mul(2);
        match &mut self.state {
            State::Exact(log) => {
                let room = most.saturating_sub(log.total);
                log.record(now, amount.min(room), self.capacity);
            }
            State::Estimate(c) => {
                let room = most.saturating_sub(c.held_ceil(now, self.window));
                c.current = c.current.saturating_add(amount.min(room));
            }
        }
    }

    /// Takes back what the window holds above the capacity, newest first.
    pub(crate) fn forgive_debt(&mut self, now: Nanos) {
        self.prune(now);
        match &mut self.state {
            State::Exact(log) => {
                let mut excess = log.total.saturating_sub(self.capacity);
                while excess > 0 {
                    let Some(newest) = log.entries.back_mut() else {
                        break;
                    };
                    let cut = excess.min(newest.1);
                    newest.1 -= cut;
                    log.total -= cut;
                    excess -= cut;
                    if newest.1 == 0 {
                        log.entries.pop_back();
                    }
                }
            }
            State::Estimate(c) => {
                let excess = c.held_ceil(now, self.window).saturating_sub(self.capacity);
                c.current = c.current.saturating_sub(excess);
            }
        }
    }

    /// `capacity` minus what the window holds; negative in debt.
    pub(crate) fn available(&mut self, now: Nanos) -> f64 {
        let held = match &self.state {
            State::Exact(log) => log.held(now, self.window) as f64,
            State::Estimate(c) => c.at(now, self.window).held(now, self.window),
        };
        self.capacity as f64 - held
    }

    /// An upstream says only `remaining` is left: a synthetic take at `now`
    /// of the difference, so it leaves the window as a real take would.
    pub(crate) fn clamp_available(&mut self, now: Nanos, remaining: u64) {
        self.prune(now);
        let target = self.capacity.saturating_sub(remaining);
        let excess = match &self.state {
            State::Exact(log) => target.saturating_sub(log.held(now, self.window)),
            // Integer takes: enough that the fractional estimate reaches it.
            State::Estimate(c) => target.saturating_sub(c.held_floor(now, self.window)),
        };
        self.debit(now, excess);
    }

    /// Applies a new capacity and window, keeping the history in the form
    /// the new capacity calls for.
    pub(crate) fn reconfigure(&mut self, limit: &Limit, now: Nanos) {
        let capacity = limit.capacity();
        let window = limit.window_nanos();
        let exact = capacity <= EXACT_WINDOW_MAX;
        match &mut self.state {
            // Takes keep their times; only what counts as inside changes.
            State::Exact(log) if exact => log.prune(now, window),
            State::Exact(log) => {
                self.state = State::Estimate(log.binned(now, window));
            }
            // Same alignment: the counts carry over as they are.
            State::Estimate(c) if !exact && window == self.window => {
                *c = c.at(now, self.window);
            }
            State::Estimate(c) => {
                // What the estimate holds now, as if taken now: it stays
                // held for a whole new window, longer rather than shorter,
                // so a change never lets through what the history forbade.
                let held = c.at(now, self.window).held_ceil(now, self.window);
                self.state = if exact {
                    let mut log = Log::default();
                    log.record(now, held, capacity);
                    State::Exact(log)
                } else {
                    let mut c = Counters::fresh(now, window);
                    c.current = held;
                    State::Estimate(c)
                };
            }
        }
        self.capacity = capacity;
        self.window = window;
        if let State::Exact(log) = &mut self.state {
            log.bound(capacity);
        }
    }

    /// True once nothing is left in the window: the state is then the same
    /// as a fresh one's, and the log gives its memory back.
    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        self.prune(now);
        match &mut self.state {
            State::Exact(log) => {
                if log.entries.is_empty() && log.entries.capacity() > 0 {
                    log.entries = VecDeque::new();
                }
                log.entries.is_empty()
            }
            State::Estimate(c) => c.previous == 0 && c.current == 0,
        }
    }

    /// Forgets what has left the window by `now` (`now` is the present).
    fn prune(&mut self, now: Nanos) {
        match &mut self.state {
            State::Exact(log) => log.prune(now, self.window),
            State::Estimate(c) => *c = c.at(now, self.window),
        }
    }
}

/// The instant a take at `at` stops counting.
pub(super) fn expiry(at: Nanos, window: u64) -> Nanos {
    at.saturating_add(window)
}

/// The start of the fixed window holding `t`.
pub(super) fn align(t: Nanos, window: u64) -> Nanos {
    t - t % window
}
