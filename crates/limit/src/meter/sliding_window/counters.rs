//! The two-counter estimate of a large sliding window.

use super::align;
use crate::meter::{Nanos, Stamp, mul_div_ceil, mul_div_floor};

/// The two-counter estimate over fixed windows `[k·window, (k+1)·window)`.
/// The sliding window ending `e` into the current fixed window is taken to
/// hold `previous·(window − e)/window + current`: the previous window's takes
/// counted as if spread evenly over it.
///
/// The bound (takes only, no debit, refund or clamp): for two consecutive
/// aligned windows that admitted `P` and `Q`, the last take in the second,
/// at offset `e`, satisfies `P·(window − e) + Q·window ≤ capacity·window`.
/// So each aligned window admits at most `capacity`, and two consecutive
/// ones `P + Q ≤ capacity + P·e/window`, less than `2·capacity` when
/// `P > 0`: any sliding window (it lies within two aligned ones) holds at
/// most `2·capacity − 1`. When the previous window's takes were in fact
/// evenly spread, the estimate is exact.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counters {
    /// The start of the current fixed window, a multiple of the window.
    pub(super) start: Nanos,
    pub(super) previous: u64,
    pub(super) current: u64,
}

impl Counters {
    pub(super) fn fresh(now: Nanos, window: u64) -> Self {
        Counters {
            start: align(now, window),
            previous: 0,
            current: 0,
        }
    }

    /// The counters as of `now`, without storing them. A `now` before
    /// `start` (a clock read before the lock) counts as `start`.
    pub(super) fn at(self, now: Nanos, window: u64) -> Self {
        let start = align(now, window);
        if start <= self.start {
            self
        } else if self.start.checked_add(window) == Some(start) {
            Counters {
                start,
                previous: self.current,
                current: 0,
            }
        } else {
            Counters::fresh(now, window)
        }
    }

    /// How much of the previous window still overlaps the sliding one.
    pub(super) fn overlap(&self, now: Nanos, window: u64) -> u64 {
        window - now.saturating_sub(self.start).min(window)
    }

    /// The estimate at `now` (counters already `at(now)`).
    pub(super) fn held(&self, now: Nanos, window: u64) -> f64 {
        let overlap = self.overlap(now, window);
        self.current as f64 + self.previous as f64 * overlap as f64 / window as f64
    }

    pub(super) fn held_ceil(&self, now: Nanos, window: u64) -> u64 {
        let overlap = self.overlap(now, window);
        let weighted = mul_div_ceil(self.previous, overlap, window);
        self.current.saturating_add(weighted)
    }

    pub(super) fn held_floor(&self, now: Nanos, window: u64) -> u64 {
        let overlap = self.overlap(now, window);
        let weighted = mul_div_floor(self.previous, overlap, window);
        self.current.saturating_add(weighted)
    }

    /// The first instant the estimate has room for `cost <= capacity`
    /// (counters already `at(now)`), 0 if now.
    pub(super) fn wait(&self, now: Nanos, window: u64, capacity: u64, cost: u64) -> Nanos {
        // The current window while `current + cost` fits in it at all,
        // otherwise the next, where today's count becomes the previous one
        // and fits by the window's end.
        let (start, previous, room) = match capacity.checked_sub(self.current.saturating_add(cost))
        {
            Some(room) => (self.start, self.previous, room),
            None => (
                self.start.saturating_add(window),
                self.current,
                capacity - cost,
            ),
        };
        // ⌈previous·overlap/window⌉ ≤ room ⇔ overlap ≤ ⌊room·window/previous⌋.
        let overlap = match previous {
            0 => window,
            p => mul_div_floor(room, window, p).min(window),
        };
        start.saturating_add(window - overlap).saturating_sub(now)
    }

    /// Gives back to the fixed window `stamp` fell in, if still counted.
    pub(super) fn refund(&mut self, stamp: Stamp, amount: u64, window: u64) {
        let start = align(stamp, window);
        let count = if start == self.start {
            &mut self.current
        } else if start.checked_add(window) == Some(self.start) {
            &mut self.previous
        } else {
            return;
        };
        *count -= amount.min(*count);
    }
}
