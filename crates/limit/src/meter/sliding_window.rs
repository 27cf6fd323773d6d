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

use super::{Check, Nanos, Stamp, mul_div_ceil, mul_div_floor};
use crate::limit::{EXACT_WINDOW_MAX, Limit};

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
fn expiry(at: Nanos, window: u64) -> Nanos {
    at.saturating_add(window)
}

/// The start of the fixed window holding `t`.
fn align(t: Nanos, window: u64) -> Nanos {
    t - t % window
}

/// The exact log: `(when, cost)` of the takes in the window, oldest first,
/// one entry per nanosecond, none of cost 0 (those that have left go at the
/// next record).
#[derive(Debug, Default)]
struct Log {
    entries: VecDeque<(Nanos, u64)>,
    /// The sum of the entries' costs, so that an admission costs a look at
    /// the expired prefix only. Recording stops at `u64::MAX`: a debt that
    /// large already blocks the whole window, as any debt above capacity.
    total: u64,
}

impl Log {
    /// The entries still inside the window at `now`.
    fn live(&self, now: Nanos, window: u64) -> impl Iterator<Item = &(Nanos, u64)> {
        self.entries
            .iter()
            .skip_while(move |(at, _)| expiry(*at, window) <= now)
    }

    fn held(&self, now: Nanos, window: u64) -> u64 {
        let gone: u64 = self
            .entries
            .iter()
            .take_while(|(at, _)| expiry(*at, window) <= now)
            .map(|(_, c)| c)
            .sum();
        self.total - gone
    }

    /// The first instant the oldest entries have freed enough for `cost`.
    fn wait(&self, now: Nanos, window: u64, capacity: u64, cost: u64) -> Nanos {
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

    fn prune(&mut self, now: Nanos, window: u64) {
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
    fn record(&mut self, at: Nanos, cost: u64, capacity: u64) {
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
    fn bound(&mut self, capacity: u64) {
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

    fn refund(&mut self, stamp: Stamp, amount: u64) {
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
    fn binned(&self, now: Nanos, window: u64) -> Counters {
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
struct Counters {
    /// The start of the current fixed window, a multiple of the window.
    start: Nanos,
    previous: u64,
    current: u64,
}

impl Counters {
    fn fresh(now: Nanos, window: u64) -> Self {
        Counters {
            start: align(now, window),
            previous: 0,
            current: 0,
        }
    }

    /// The counters as of `now`, without storing them. A `now` before
    /// `start` (a clock read before the lock) counts as `start`.
    fn at(self, now: Nanos, window: u64) -> Self {
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
    fn overlap(&self, now: Nanos, window: u64) -> u64 {
        window - now.saturating_sub(self.start).min(window)
    }

    /// The estimate at `now` (counters already `at(now)`).
    fn held(&self, now: Nanos, window: u64) -> f64 {
        let overlap = self.overlap(now, window);
        self.current as f64 + self.previous as f64 * overlap as f64 / window as f64
    }

    fn held_ceil(&self, now: Nanos, window: u64) -> u64 {
        let overlap = self.overlap(now, window);
        let weighted = mul_div_ceil(self.previous, overlap, window);
        self.current.saturating_add(weighted)
    }

    fn held_floor(&self, now: Nanos, window: u64) -> u64 {
        let overlap = self.overlap(now, window);
        let weighted = mul_div_floor(self.previous, overlap, window);
        self.current.saturating_add(weighted)
    }

    /// The first instant the estimate has room for `cost <= capacity`
    /// (counters already `at(now)`), 0 if now.
    fn wait(&self, now: Nanos, window: u64, capacity: u64, cost: u64) -> Nanos {
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
    fn refund(&mut self, stamp: Stamp, amount: u64, window: u64) {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    const S: u64 = 1_000_000_000;
    const MIN: u64 = 60 * S;

    fn exact(capacity: u64, window: u64) -> SlidingWindow {
        SlidingWindow::new(
            &Limit::sliding_window(capacity, Duration::from_nanos(window)),
            0,
        )
    }

    fn take_ok(w: &mut SlidingWindow, now: Nanos, cost: u64) -> Stamp {
        assert_eq!(w.check(now, cost), Ok(()), "{cost} at {now}");
        w.take(now, cost)
    }

    #[test]
    fn seed_session_limit_refuses_the_eleventh_until_the_first_expires() {
        let mut w = SlidingWindow::new(&Limit::sliding_window(10, Duration::from_secs(60)), 0);
        for i in 0..10 {
            take_ok(&mut w, i * S, 1);
        }
        assert_eq!(w.check(10 * S, 1), Err(Some(50 * S)));
        assert_eq!(
            w.check(MIN - 1, 1),
            Err(Some(1)),
            "not one nanosecond early"
        );
        take_ok(&mut w, MIN, 1);
        // The next one waits for the take at 1 s.
        assert_eq!(w.check(MIN, 1), Err(Some(S)));
        assert_eq!(w.available(MIN), 0.0);
    }

    #[test]
    fn weighted_costs_wait_for_enough_to_expire() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 0, 4);
        take_ok(&mut w, S, 5);
        assert_eq!(w.check(2 * S, 1), Ok(()));
        // 3 needs 2 more: the 4 taken at 0 must leave.
        assert_eq!(w.check(2 * S, 3), Err(Some(MIN - 2 * S)));
        // 8 needs the 5 at 1 s gone as well.
        assert_eq!(w.check(2 * S, 8), Err(Some(MIN + S - 2 * S)));
        take_ok(&mut w, 2 * S, 1);
        take_ok(&mut w, 2 * S, 0);
        assert_eq!(w.available(2 * S), 0.0);
    }

    #[test]
    fn same_nanosecond_takes_share_an_entry() {
        let mut w = exact(10, MIN);
        for _ in 0..5 {
            take_ok(&mut w, 7, 1);
        }
        let State::Exact(log) = &w.state else {
            panic!()
        };
        assert_eq!(log.entries, [(7, 5)]);
    }

    #[test]
    fn refund_returns_to_the_take_it_came_from() {
        let mut w = exact(10, MIN);
        let first = take_ok(&mut w, 0, 5);
        take_ok(&mut w, 10 * S, 5);
        w.refund(20 * S, first, 3);
        assert_eq!(w.available(20 * S), 3.0);
        take_ok(&mut w, 20 * S, 3);
        // Once the first take (now 2) has left, the 5 and 3 remain; had the
        // refund gone to the newest entry, 5 would be free here.
        assert_eq!(w.available(MIN), 2.0);
    }

    #[test]
    fn refund_after_the_take_left_the_window_does_nothing() {
        let mut w = exact(10, MIN);
        let first = take_ok(&mut w, 0, 5);
        take_ok(&mut w, 30 * S, 5);
        w.refund(MIN, first, 5);
        assert_eq!(w.available(MIN), 5.0);
        w.refund(MIN, 12345, 5);
        assert_eq!(w.available(MIN), 5.0, "no take at that stamp");
    }

    #[test]
    fn refund_never_goes_below_zero() {
        let mut w = exact(10, MIN);
        let s = take_ok(&mut w, 0, 4);
        take_ok(&mut w, 1, 4);
        w.refund(2, s, 100);
        assert_eq!(w.available(2), 6.0, "only the 4 of that take come back");
        w.refund(2, s, 1);
        assert_eq!(w.available(2), 6.0);
    }

    #[test]
    fn debit_is_debt_until_it_leaves_the_window() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 0, 10);
        w.debit(10 * S, 5);
        assert_eq!(w.available(10 * S), -5.0);
        assert_eq!(w.check(10 * S, 1), Err(Some(50 * S)));
        assert_eq!(w.available(MIN), 5.0);
        assert_eq!(w.check(MIN, 6), Err(Some(10 * S)));
        assert!(w.check(MIN + 10 * S, 10).is_ok());
    }

    #[test]
    fn debt_stops_at_one_window() {
        let mut w = exact(4, MIN);
        for i in 0..1_000 {
            w.debit(i, 1);
        }
        let State::Exact(log) = &w.state else {
            panic!()
        };
        // Twice the capacity held, no more: one window of debt.
        assert_eq!((log.entries.len(), log.total), (8, 8));
        assert_eq!(w.available(999), -4.0);
        assert_eq!(w.check(MIN + 3, 1), Err(Some(1)));
        assert!(w.check(MIN + 7, 4).is_ok());
        w.forgive_debt(999);
        assert_eq!(w.available(999), 0.0);
        let mut big = SlidingWindow::new(
            &Limit::new(1_000, Duration::from_nanos(MIN))
                .algorithm(crate::Algorithm::SlidingWindow),
            0,
        );
        big.debit(0, u64::MAX);
        assert_eq!(big.available(0), -1_000.0);
        big.forgive_debt(0);
        assert_eq!(big.available(0), 0.0);
    }

    #[test]
    fn clamp_records_what_upstream_says_is_gone() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 0, 2);
        w.clamp_available(S, 3);
        assert_eq!(w.available(S), 3.0);
        w.clamp_available(S, 9);
        assert_eq!(w.available(S), 3.0, "a clamp never adds");
        assert_eq!(w.check(S, 4), Err(Some(MIN - S)));
        assert_eq!(
            w.check(MIN, 6),
            Err(Some(S)),
            "the clamp leaves like a take"
        );
        assert_eq!(w.check(MIN + S, 10), Ok(()));
    }

    #[test]
    fn cost_above_capacity_estimates_whole_windows() {
        let mut w = exact(10, MIN);
        assert_eq!(w.check(0, 25), Err(Some(2 * MIN)));
        assert_eq!(w.check(0, 20), Err(Some(MIN)));
        take_ok(&mut w, 0, 10);
        assert_eq!(w.check(S, 25), Err(Some(2 * MIN + MIN - S)));
        let mut big = exact(2_000, MIN);
        assert_eq!(big.check(0, 4_001), Err(Some(2 * MIN)));
    }

    #[test]
    fn late_takes_stay_in_time_order() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 10, 1);
        take_ok(&mut w, 5, 1);
        take_ok(&mut w, 10, 1);
        let State::Exact(log) = &w.state else {
            panic!()
        };
        assert_eq!(log.entries, [(5, 1), (10, 2)]);
    }

    #[test]
    fn check_about_the_future_forgets_nothing() {
        let mut w = exact(2, MIN);
        take_ok(&mut w, 0, 2);
        assert!(w.check(2 * MIN, 2).is_ok());
        assert_eq!(w.check(S, 1), Err(Some(MIN - S)));
        let mut e = exact(2_000, MIN);
        take_ok(&mut e, 0, 2_000);
        assert!(e.check(3 * MIN, 2_000).is_ok());
        assert!(e.check(S, 1).is_err());
    }

    #[test]
    fn estimate_weights_the_previous_window() {
        let mut w = exact(2_000, MIN);
        take_ok(&mut w, 0, 2_000);
        // The same fixed window: wait for the next, then until the previous
        // window's weight leaves room for one: ⌈2000·(60 s − e)/60 s⌉ ≤ 1999.
        assert_eq!(w.check(30 * S, 1), Err(Some(30 * S + 30_000_000)));
        assert!(w.check(MIN + 30_000_000 - 1, 1).is_err());
        assert!(w.check(MIN + 30_000_000, 1).is_ok());
        // Half-way through the next window, half of the previous counts.
        assert_eq!(w.available(MIN + 30 * S), 1_000.0);
        take_ok(&mut w, MIN + 30 * S, 1_000);
        assert_eq!(w.check(MIN + 30 * S, 1), Err(Some(30_000_000)));
    }

    #[test]
    fn estimate_refund_debit_clamp() {
        let mut w = exact(2_000, MIN);
        let old = take_ok(&mut w, S, 1_000);
        let new = take_ok(&mut w, MIN + S, 500);
        w.refund(MIN + 2 * S, old, 400);
        let State::Estimate(c) = &w.state else {
            panic!()
        };
        assert_eq!((c.previous, c.current), (600, 500));
        w.refund(MIN + 2 * S, new, 600);
        let State::Estimate(c) = &w.state else {
            panic!()
        };
        assert_eq!((c.previous, c.current), (600, 0), "never below zero");
        w.refund(2 * MIN + 2 * S, old, 600);
        let State::Estimate(c) = &w.state else {
            panic!()
        };
        assert_eq!((c.previous, c.current), (0, 0), "the old window has gone");
        w.debit(2 * MIN + 2 * S, 2_500);
        assert_eq!(w.available(2 * MIN + 2 * S), -500.0);
        // Next window: ⌈2500·overlap/60 s⌉ ≤ 1999 once overlap ≤ 47.976 s.
        assert_eq!(w.check(3 * MIN, 1), Err(Some(12_024_000_000)));
        let mut w = exact(2_000, MIN);
        take_ok(&mut w, 0, 1_000);
        w.clamp_available(MIN + MIN / 3, 100);
        assert!(w.available(MIN + MIN / 3) <= 100.0);
        assert!(w.available(MIN + MIN / 3) > 99.0);
    }

    #[test]
    fn reconfigure_exact_to_estimate_and_back() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 30 * S, 6);
        take_ok(&mut w, MIN + S, 3);
        let big = Limit::sliding_window(3_000, Duration::from_secs(60));
        w.reconfigure(&big, MIN + 2 * S);
        let State::Estimate(c) = &w.state else {
            panic!()
        };
        assert_eq!((c.start, c.previous, c.current), (MIN, 6, 3));
        take_ok(&mut w, MIN + 30 * S, 2_000);
        // Back below EXACT_WINDOW_MAX: what the estimate holds now, taken now.
        w.reconfigure(
            &Limit::sliding_window(1_000, Duration::from_secs(60)),
            MIN + 30 * S,
        );
        let State::Exact(log) = &w.state else {
            panic!()
        };
        assert_eq!(log.entries, [(MIN + 30 * S, 2_006)]);
        assert_eq!(w.check(MIN + 30 * S, 1), Err(Some(MIN)));
        assert!(w.is_idle(2 * MIN + 30 * S));
    }

    #[test]
    fn reconfigure_keeps_the_history() {
        let mut w = exact(10, MIN);
        take_ok(&mut w, 0, 5);
        take_ok(&mut w, 20 * S, 5);
        // A shorter window lets the oldest take go sooner.
        w.reconfigure(&Limit::sliding_window(10, Duration::from_secs(30)), 25 * S);
        assert_eq!(w.check(25 * S, 6), Err(Some(25 * S)));
        assert_eq!(w.available(30 * S), 5.0);
        // A smaller capacity: the same history leaves less.
        w.reconfigure(&Limit::sliding_window(6, Duration::from_secs(30)), 30 * S);
        assert_eq!(w.available(30 * S), 1.0);
        // Estimate to estimate under a new window: the held count, now.
        let mut e = exact(2_000, MIN);
        take_ok(&mut e, 0, 1_500);
        e.reconfigure(
            &Limit::sliding_window(2_000, Duration::from_secs(10)),
            5 * S,
        );
        assert_eq!(e.available(5 * S), 500.0);
        assert_eq!(e.available(10 * S), 2_000.0 - 1_500.0);
        assert_eq!(e.available(15 * S), 2_000.0 - 750.0);
    }

    #[test]
    fn idle_when_nothing_is_left_in_the_window() {
        let mut w = exact(10, MIN);
        assert!(w.is_idle(0));
        take_ok(&mut w, S, 1);
        assert!(!w.is_idle(MIN));
        assert!(w.is_idle(MIN + S));
        let State::Exact(log) = &w.state else {
            panic!()
        };
        assert_eq!(log.entries.capacity(), 0, "memory given back");
        let mut e = exact(2_000, MIN);
        assert!(e.is_idle(0));
        take_ok(&mut e, S, 1);
        assert!(!e.is_idle(MIN + S), "still weighted in the next window");
        assert!(e.is_idle(2 * MIN));
        let s = take_ok(&mut e, 2 * MIN, 3);
        e.refund(2 * MIN, s, 3);
        assert!(e.is_idle(2 * MIN), "a full refund leaves nothing");
    }

    #[test]
    fn struct_is_small() {
        assert!(std::mem::size_of::<SlidingWindow>() <= 64);
    }

    /// What a schedule does, `dt` nanoseconds after the previous step.
    #[derive(Debug, Clone)]
    enum Op {
        /// If refused and `waits`, waits as told and takes then, as a
        /// queued waiter woken on time does.
        Take {
            dt: u64,
            cost: u64,
            waits: bool,
        },
        Refund {
            dt: u64,
            of: usize,
            amount: u64,
        },
        Debit {
            dt: u64,
            amount: u64,
        },
        Clamp {
            dt: u64,
            remaining: u64,
        },
    }

    impl Op {
        fn dt(&self) -> u64 {
            match *self {
                Op::Take { dt, .. }
                | Op::Refund { dt, .. }
                | Op::Debit { dt, .. }
                | Op::Clamp { dt, .. } => dt,
            }
        }
    }

    /// Steps of up to 2 windows (many at the same nanosecond, many within
    /// one window), costs up to the capacity; `weights` of take, refund,
    /// debit and clamp. Mostly debits come densely, to pile up debt entries.
    fn ops(window: u64, capacity: u64, weights: [u32; 4]) -> impl Strategy<Value = Vec<Op>> {
        let dense = weights[2] > weights[0];
        let dt = if dense {
            prop_oneof![2 => Just(0), 16 => 0..window / 256 + 1, 1 => 0..window].boxed()
        } else {
            prop_oneof![
                Just(0),
                0..window / 64 + 1,
                0..window / 8 + 1,
                0..2 * window
            ]
            .boxed()
        };
        let cost = 1..=capacity;
        let take = (dt.clone(), cost.clone(), any::<bool>())
            .prop_map(|(dt, cost, waits)| Op::Take { dt, cost, waits });
        let refund = (dt.clone(), any::<usize>(), cost.clone())
            .prop_map(|(dt, of, amount)| Op::Refund { dt, of, amount });
        let debit = (dt.clone(), cost).prop_map(|(dt, amount)| Op::Debit { dt, amount });
        let clamp = (dt, 0..=capacity).prop_map(|(dt, remaining)| Op::Clamp { dt, remaining });
        let [t, r, d, c] = weights;
        let op = prop_oneof![t => take, r => refund, d => debit, c => clamp];
        prop::collection::vec(op, 1..150)
    }

    fn exact_limits() -> impl Strategy<Value = (u64, u64)> {
        (1..=EXACT_WINDOW_MAX.min(40), 1u64..1_000_000)
    }

    fn any_limits() -> impl Strategy<Value = (u64, u64)> {
        prop_oneof![
            exact_limits(),
            (EXACT_WINDOW_MAX + 1..3_000, 1u64..1_000_000)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// No window `(t − window, t]` ever holds more than the capacity,
        /// counting takes at what they cost after refunds, and debits: a
        /// brute-force oracle over everything recorded. Merged debt entries
        /// may hold more than the oracle, never less. Refunds are at most
        /// what the take still holds, as a grant's are.
        #[test]
        fn exact_never_holds_more_than_capacity(
            (capacity, window, ops) in (exact_limits(), prop_oneof![Just([6, 2, 1, 0]), Just([2, 1, 6, 0])])
                .prop_flat_map(|((c, w), weights)| (Just(c), Just(w), ops(w, c, weights))),
        ) {
            let mut w = exact(capacity, window);
            let mut now = 0u64;
            let mut net: BTreeMap<Nanos, u64> = BTreeMap::new();
            // (stamp, what that take still holds)
            let mut takes: Vec<(Stamp, u64)> = Vec::new();
            let mut debited = false;
            for op in ops {
                now += op.dt();
                match op {
                    Op::Take { cost, waits, .. } => {
                        match w.check(now, cost) {
                            Ok(()) => {}
                            Err(Some(wait)) if waits => {
                                now += wait;
                                prop_assert_eq!(w.check(now, cost), Ok(()));
                            }
                            Err(_) => continue,
                        }
                        takes.push((w.take(now, cost), cost));
                        *net.entry(now).or_default() += cost;
                    }
                    Op::Refund { of, amount, .. } => {
                        let n = takes.len().max(1);
                        let Some((stamp, holds)) = takes.get_mut(of % n) else { continue };
                        let amount = amount.min(*holds);
                        *holds -= amount;
                        w.refund(now, *stamp, amount);
                        if *stamp + window > now {
                            *net.entry(*stamp).or_default() -= amount;
                        }
                    }
                    Op::Debit { amount, .. } => {
                        debited = true;
                        // What the meter took (it stops at one window of
                        // debt) is what the window holds from now on.
                        let before = w.available(now);
                        w.debit(now, amount);
                        let recorded = (before - w.available(now)).round() as u64;
                        prop_assert!(recorded <= amount);
                        prop_assert!(w.available(now) >= -(capacity as f64));
                        *net.entry(now).or_default() += recorded;
                    }
                    Op::Clamp { .. } => unreachable!(),
                }
                let held: u64 = net.range(now.saturating_sub(window - 1)..).map(|(_, c)| c).sum();
                if matches!(op, Op::Take { .. }) {
                    prop_assert!(held <= capacity, "{held} in the window ending {now}");
                }
                let available = w.available(now);
                let oracle = capacity as f64 - held as f64;
                prop_assert!(available <= oracle, "{available} available, oracle {oracle}");
                if !debited {
                    prop_assert_eq!(available, oracle);
                }
            }
        }

        /// `Err(Some(w))` is exact: refused at `now + w − 1`, admitted at
        /// `now + w`, whatever debits, refunds and clamps came before. Costs
        /// above the capacity always get a wait.
        #[test]
        fn the_wait_is_exact(
            (capacity, window, ops) in (any_limits(), prop_oneof![Just([6, 2, 1, 1]), Just([2, 1, 6, 1])])
                .prop_flat_map(|((c, w), weights)| (Just(c), Just(w), ops(w, c, weights))),
            seed in any::<u64>(),
        ) {
            let mut w = exact(capacity, window);
            let mut now = seed % (4 * window);
            let mut stamps = Vec::new();
            for op in ops {
                now += op.dt();
                apply(&mut w, now, &op, &mut stamps);
                let Op::Take { cost, .. } = op else { continue };
                if let Err(wait) = w.check(now, cost) {
                    let wait = wait.expect("a sliding window always knows the wait");
                    prop_assert!(wait > 0);
                    prop_assert!(w.check(now + wait - 1, cost).is_err(), "admitted before {wait}");
                    prop_assert_eq!(w.check(now + wait, cost), Ok(()), "refused after {}", wait);
                }
                prop_assert!(matches!(w.check(now, capacity + cost), Err(Some(n)) if n > 0));
            }
        }

        /// Refunds (and everything else) never lift availability above the
        /// capacity, in either representation.
        #[test]
        fn available_never_exceeds_capacity(
            (capacity, window, ops) in any_limits()
                .prop_flat_map(|(c, w)| (Just(c), Just(w), ops(w, c, [6, 2, 1, 1]))),
        ) {
            let mut w = exact(capacity, window);
            let mut now = 0;
            let mut stamps = Vec::new();
            for op in ops {
                now += op.dt();
                apply(&mut w, now, &op, &mut stamps);
                prop_assert!(w.available(now) <= capacity as f64);
                if w.is_idle(now) {
                    prop_assert_eq!(w.available(now), capacity as f64);
                }
            }
        }

        /// The documented bound of the estimate: for aligned windows
        /// admitting `P` then `Q`, the last take of the second at offset `e`
        /// has `P·(window − e) + Q·window ≤ capacity·window`; and no sliding
        /// window holds `2·capacity` or more.
        #[test]
        fn estimate_stays_within_its_bound(
            capacity in EXACT_WINDOW_MAX + 1..3_000,
            window in 100u64..1_000_000,
            steps in prop::collection::vec(
                (prop_oneof![4 => 0u64..25, 1 => 0u64..300], 1u64..=600, any::<bool>()),
                1..300,
            ),
        ) {
            let mut w = exact(capacity, window);
            let mut now = 0u64;
            let mut admitted: Vec<(Nanos, u64)> = Vec::new();
            for (dt, cost, waits) in steps {
                // About 8 steps a window, sometimes skipping some.
                now += dt * window / 100;
                match w.check(now, cost) {
                    Ok(()) => {}
                    Err(Some(wait)) if waits => now += wait,
                    Err(_) => continue,
                }
                prop_assert_eq!(w.check(now, cost), Ok(()));
                w.take(now, cost);
                admitted.push((now, cost));
            }
            let mut per_window: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
            for &(at, cost) in &admitted {
                let e = per_window.entry(at / window).or_default();
                e.0 += cost;
                e.1 = at % window;
            }
            for (&k, &(q, e)) in &per_window {
                let p = k.checked_sub(1).and_then(|k| per_window.get(&k)).map_or(0, |x| x.0);
                let lhs = p as u128 * (window - e) as u128 + q as u128 * window as u128;
                prop_assert!(lhs <= capacity as u128 * window as u128, "P {p} Q {q} at {e}");
                prop_assert!(p + q < 2 * capacity);
            }
            for (i, &(end, _)) in admitted.iter().enumerate() {
                let held: u64 = admitted[..=i]
                    .iter()
                    .filter(|(at, _)| at + window > end)
                    .map(|(_, c)| c)
                    .sum();
                prop_assert!(held < 2 * capacity, "{held} in one window");
            }
        }
    }

    fn apply(w: &mut SlidingWindow, now: Nanos, op: &Op, stamps: &mut Vec<Stamp>) {
        match *op {
            Op::Take { cost, .. } => {
                if w.check(now, cost).is_ok() {
                    stamps.push(w.take(now, cost));
                }
            }
            Op::Refund { of, amount, .. } => {
                if let Some(&stamp) = stamps.get(of % stamps.len().max(1)) {
                    w.refund(now, stamp, amount);
                }
            }
            Op::Debit { amount, .. } => w.debit(now, amount),
            Op::Clamp { remaining, .. } => w.clamp_available(now, remaining),
        }
    }
}
