//! The lock-free path of a bucket resource (token bucket or GCRA) that
//! nobody waits on: one compare-and-swap on a 64-bit word, as governor
//! does, instead of the resource's lock.
//!
//! The word holds the bucket's theoretical arrival time (see
//! `meter/bucket.rs`), a version and a `SHUT` bit. Whoever holds the
//! resource's lock shuts the fast path first and owns the arrival time
//! until it lets go (see [`super::Locked`]); it opens the path again only
//! when nothing else needs the lock: nobody queued (so a fast caller can
//! never jump ahead of a waiter), no grant held (whose settle and
//! `observe_answer` count what was taken since), no adaptive state (pauses
//! and reductions), not closed or dropped from the map.
//!
//! To fit 64 bits and stay exact, the arrival time is kept in units of
//! `g / capacity` nanoseconds, `g = gcd(capacity, window)`, counted from a
//! base chosen when the path opens: one cost unit is then the integer
//! `window / g` and a nanosecond `capacity / g` of them. Limits whose
//! numbers do not reduce that far (a burst of more than 2^50 units) stay on
//! the locked path; when the arrival time runs out of room the fast path
//! declines, the locked path takes, and opening again moves the base.
//!
//! Opening bumps the version, so that a fast caller that read the word
//! before the lock was taken fails its compare-and-swap even if the
//! arrival time came back the same, and reads the parameters again. The
//! version has 10 bits: a caller would have to stall between its read and
//! its swap for 1,024 lockings that also changed the parameters and left
//! the same bits behind.
//!
//! Grants go this way too ([`Fast::try_grant`]): a held grant no longer
//! shuts the path. What a grant needs besides the tokens is counted beside
//! the word: the resource's in-flight count, and [`Fast::taken`], the
//! running total that an answer to the grant's call is compared with. So
//! that a check costs nothing more while no grant is held, the word's
//! `HELD` bit says whether takes must add to `taken`: a grant sets it in
//! the swap that takes its tokens, having counted itself in flight first,
//! and the first take to find no grant in flight clears it in its own
//! swap (see `Fast::swap`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::meter::{Nanos, Params};

/// Bits of the arrival time; above them the version, then `HELD`, then
/// `SHUT`.
const TAT_BITS: u32 = 52;
const TAT_MASK: u64 = (1 << TAT_BITS) - 1;
const SHUT: u64 = 1 << 63;
/// Grants are held: takes count themselves in [`Fast::taken`].
const HELD: u64 = 1 << 62;
const VERSION_ONE: u64 = 1 << TAT_BITS;
const VERSION_MASK: u64 = !TAT_MASK & !SHUT & !HELD;
/// The largest tolerance plus a window's units (and margin, and units per
/// nanosecond) the fast path takes: it leaves the arrival time room to run
/// ahead of the base.
const UNITS_MAX: u64 = 1 << 50;

#[derive(Debug)]
pub(crate) struct Fast {
    word: AtomicU64,
    /// The nanosecond the arrival time counts from.
    base: AtomicU64,
    /// Units per nanosecond: `capacity / g`.
    rate: AtomicU64,
    /// Units per cost unit: `window / g`.
    interval: AtomicU64,
    /// The burst, in units.
    tau: AtomicU64,
    /// The jitter margin, in units.
    margin: AtomicU64,
    /// Everything taken so far, net of settles (wrapping): comparing it
    /// with the value a grant saw tells what was taken since that grant.
    /// Counted by every take under the lock, and on this path while
    /// `HELD` is set (without a grant held nobody compares).
    pub(crate) taken: AtomicU64,
}

/// What the fast path reads besides the word.
#[derive(Clone, Copy)]
struct Units {
    base: u64,
    rate: u64,
    interval: u64,
    tau: u64,
    margin: u64,
}

impl Fast {
    /// Shut: the first unlock opens it if the resource allows.
    pub(crate) fn new() -> Self {
        Fast {
            word: AtomicU64::new(SHUT),
            base: AtomicU64::new(0),
            rate: AtomicU64::new(0),
            interval: AtomicU64::new(0),
            tau: AtomicU64::new(0),
            margin: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        }
    }

    /// Takes `cost` at `now` without the lock: `Some(Ok)` taken,
    /// `Some(Err(wait))` refused, `None` when the locked path must decide
    /// (shut, a cost above the burst, the arrival time out of room).
    /// `in_flight` is the resource's count of grants held.
    #[inline]
    pub(crate) fn try_take(
        &self,
        now: Nanos,
        cost: u64,
        in_flight: &AtomicU32,
    ) -> Option<Result<(), Nanos>> {
        let word = self.swap(now, cost, in_flight, false)?;
        Some(word.map(|word| {
            if word & HELD != 0 {
                self.taken.fetch_add(cost, Ordering::Relaxed);
            }
        }))
    }

    /// [`Fast::try_take`] for a grant, which `in_flight` has counted
    /// already (so that a take meanwhile does not stop counting under it):
    /// `Some(Ok(taken))` with [`Fast::taken`] right after the take.
    #[inline]
    pub(crate) fn try_grant(
        &self,
        now: Nanos,
        cost: u64,
        in_flight: &AtomicU32,
    ) -> Option<Result<u64, Nanos>> {
        // A grant of nothing might leave the word as it was, and a take
        // could then clear `HELD` under it: the lock decides those.
        if cost == 0 {
            return None;
        }
        let word = self.swap(now, cost, in_flight, true)?;
        Some(word.map(|_| {
            self.taken
                .fetch_add(cost, Ordering::Relaxed)
                .wrapping_add(cost)
        }))
    }

    /// Whether the path is open (no lock holder needs it shut).
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.word.load(Ordering::Acquire) & SHUT == 0
    }

    /// One swap taking `cost` at `now`: the word swapped in, or the wait
    /// (see [`Fast::try_take`]). A grant sets `HELD`; a take that finds it
    /// set and no grant in flight clears it, in the same swap: a grant
    /// counts itself in flight before its own swap, so one that swapped
    /// before this read of the word is seen in `in_flight`, and one that
    /// swaps after it makes this swap fail, or finds `HELD` cleared and
    /// sets it again.
    #[inline(always)]
    fn swap(
        &self,
        now: Nanos,
        cost: u64,
        in_flight: &AtomicU32,
        grant: bool,
    ) -> Option<Result<u64, Nanos>> {
        let mut word = self.word.load(Ordering::Acquire);
        let mut u = self.units();
        loop {
            if word & SHUT != 0 {
                return None;
            }
            let inc = cost.checked_mul(u.interval).filter(|i| *i <= u.tau)?;
            // A `now` before the base (read long before the path last
            // opened) is for the locked path.
            let now_u = now
                .checked_sub(u.base)?
                .checked_mul(u.rate)
                .filter(|n| *n <= TAT_MASK - u.tau - u.margin)?;
            // The margin held back once per busy period, as in
            // `Params::take`.
            let was = word & TAT_MASK;
            let (base, idle) = match now_u.saturating_sub(was) {
                idle if idle < u.rate => (was, 0),
                idle => (now_u, idle),
            };
            let tat = base + u.margin.min(idle) + inc;
            let ready = now_u + u.tau;
            if tat <= ready || was <= now_u {
                let held = if grant || (word & HELD != 0 && in_flight.load(Ordering::Acquire) != 0)
                {
                    HELD
                } else {
                    0
                };
                let next = (word & VERSION_MASK) | held | tat;
                match self.word.compare_exchange_weak(
                    word,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Some(Ok(next)),
                    Err(again) => {
                        // The parameters change only with the version.
                        if (again ^ word) & VERSION_MASK != 0 {
                            u = self.units();
                        }
                        word = again;
                    }
                }
            } else {
                // A refusal changes nothing; it stands if the word (and so
                // the parameters read) did not change meanwhile.
                let again = self.word.load(Ordering::Acquire);
                if again == word {
                    return Some(Err((tat - ready).div_ceil(u.rate)));
                }
                if (again ^ word) & VERSION_MASK != 0 {
                    u = self.units();
                }
                word = again;
            }
        }
    }

    /// The parameters in force at the version last read (acquire) or a
    /// later one.
    #[inline]
    fn units(&self) -> Units {
        Units {
            base: self.base.load(Ordering::Relaxed),
            rate: self.rate.load(Ordering::Relaxed),
            interval: self.interval.load(Ordering::Relaxed),
            tau: self.tau.load(Ordering::Relaxed),
            margin: self.margin.load(Ordering::Relaxed),
        }
    }

    /// The jitter margin in force, in nanoseconds (lock holders only).
    pub(crate) fn margin_nanos(&self) -> Nanos {
        let rate = self.rate.load(Ordering::Relaxed).max(1);
        self.margin.load(Ordering::Relaxed) / rate
    }

    /// Shuts the fast path (lock holders only): the arrival time, scaled as
    /// `meter/bucket.rs` keeps it, if the fast path had it; `None` if it
    /// was shut already. `capacity` is the one it was opened with.
    pub(crate) fn shut(&self, capacity: u64) -> Option<u128> {
        if self.word.load(Ordering::Acquire) & SHUT != 0 {
            return None;
        }
        let word = self.word.fetch_or(SHUT, Ordering::AcqRel);
        let base = self.base.load(Ordering::Relaxed) as u128;
        let rate = self.rate.load(Ordering::Relaxed).max(1);
        let unit = (capacity / rate) as u128;
        Some((base * rate as u128 + (word & TAT_MASK) as u128) * unit)
    }

    /// Opens the fast path again as it was shut (lock holders only; the
    /// arrival time and parameters untouched since).
    pub(crate) fn reopen(&self) {
        let word = self.word.load(Ordering::Relaxed);
        let version = word.wrapping_add(VERSION_ONE) & VERSION_MASK;
        self.word
            .store(version | (word & (TAT_MASK | HELD)), Ordering::Release);
    }

    /// Opens the fast path at `tat` (scaled) under `params` (lock holders
    /// only, the path shut), `held` if grants are (or may be) held; false,
    /// leaving it shut, when the limit's numbers do not fit it.
    pub(crate) fn open(&self, tat: u128, params: &Params, held: bool) -> bool {
        let unit = params.unit;
        let rate = params.capacity / unit;
        let interval = params.window / unit;
        let tau = params.burst as u128 * interval as u128;
        let margin = params.margin as u128 * rate as u128;
        if rate == 0 || rate > UNITS_MAX || tau > UNITS_MAX as u128 || margin > UNITS_MAX as u128 {
            return false;
        }
        // Rounded up to a whole unit (only a reconfiguration leaves a
        // fraction): never more generous.
        let tat = tat.div_ceil(unit as u128);
        // The arrival time runs at most a burst and a window's capacity
        // (the deepest debt), or a burst and the margin, ahead of the time
        // of any lock holder, so a base that far behind it is not after
        // any `now` read since.
        let lead = tau + margin + rate as u128 * params.window as u128;
        let Ok(base) = u64::try_from(tat.saturating_sub(lead) / rate as u128) else {
            return false;
        };
        let rest = tat - base as u128 * rate as u128;
        if lead + rate as u128 > UNITS_MAX as u128 || rest > TAT_MASK as u128 {
            return false;
        }
        let rest = rest as u64;
        self.base.store(base, Ordering::Relaxed);
        self.rate.store(rate, Ordering::Relaxed);
        self.interval.store(interval, Ordering::Relaxed);
        self.tau.store(tau as u64, Ordering::Relaxed);
        self.margin.store(margin as u64, Ordering::Relaxed);
        let word = self.word.load(Ordering::Relaxed);
        let version = word.wrapping_add(VERSION_ONE) & VERSION_MASK;
        let held = if held { HELD } else { 0 };
        self.word.store(version | held | rest, Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limit;
    use crate::meter::Bucket;
    use std::time::Duration;

    /// No grant in flight.
    static NONE: AtomicU32 = AtomicU32::new(0);

    fn opened(limit: Limit, tat: u128) -> (Fast, Params) {
        let p = Bucket::new(&limit).params;
        let f = Fast::new();
        assert!(f.open(tat, &p, false));
        (f, p)
    }

    #[test]
    fn shut_gives_back_the_arrival_time() {
        let limit = Limit::new(1, Duration::from_millis(109)).burst(1);
        let (f, p) = opened(limit, 0);
        assert_eq!(f.try_take(0, 1, &NONE), Some(Ok(())));
        let tat = f.shut(p.capacity).unwrap();
        assert_eq!(tat, 109_000_000);
        assert!(f.open(tat, &p, false));
        assert_eq!(f.try_take(0, 1, &NONE), Some(Err(109_000_000)));
        assert_eq!(f.try_take(109_000_000, 1, &NONE), Some(Ok(())));
    }

    #[test]
    fn declines_what_the_locked_path_must_decide() {
        let (f, p) = opened(Limit::per_second(3).burst(10), 3_000_000_000_000);
        // Shut; a cost above the burst; a time before the base.
        assert_eq!(f.try_take(1_000_000_000_000, 11, &NONE), None);
        assert_eq!(f.try_take(0, 1, &NONE), None);
        assert_eq!(f.try_take(1_000_000_000_000, 1, &NONE), Some(Ok(())));
        // Far enough ahead, the arrival time has no room left.
        assert_eq!(f.try_take(u64::MAX / 2, 1, &NONE), None);
        assert!(f.shut(p.capacity).is_some());
        assert_eq!(f.try_take(1_000_000_000_000, 1, &NONE), None);
        assert!(f.shut(p.capacity).is_none());
        // Numbers that do not reduce stay on the locked path.
        let odd = Limit::new(1_000_000_007, Duration::from_secs(1));
        assert!(!Fast::new().open(0, &Bucket::new(&odd).params, false));
        assert!(f.open(0, &p, false));
    }

    #[test]
    fn takes_count_themselves_while_a_grant_is_held() {
        let (f, p) = opened(Limit::per_second(10).burst(10), 0);
        let in_flight = AtomicU32::new(0);
        let taken = |f: &Fast| f.taken.load(Ordering::Relaxed);
        // Nobody holds a grant: nothing to compare, nothing counted.
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Ok(())));
        assert_eq!(taken(&f), 0);
        // A grant (counted in flight by its caller first) sees the total
        // right after its take; a check meanwhile counts.
        in_flight.fetch_add(1, Ordering::AcqRel);
        assert_eq!(f.try_grant(0, 2, &in_flight), Some(Ok(2)));
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Ok(())));
        assert_eq!(taken(&f), 3);
        // Gone: the first take that finds no grant in flight stops the
        // counting, and counts nothing itself.
        in_flight.fetch_sub(1, Ordering::AcqRel);
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Ok(())));
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Ok(())));
        assert_eq!(taken(&f), 3);
        // A refusal counts nothing; a grant of nothing goes to the lock.
        in_flight.fetch_add(1, Ordering::AcqRel);
        assert_eq!(f.try_grant(0, 0, &in_flight), None);
        assert!(matches!(f.try_grant(0, 5, &in_flight), Some(Err(_))));
        assert_eq!(taken(&f), 3);
        // Shut and opened again while one is held, the count goes on.
        assert_eq!(f.try_grant(0, 1, &in_flight), Some(Ok(4)));
        let tat = f.shut(p.capacity).unwrap();
        assert!(f.open(tat, &p, true));
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Ok(())));
        assert_eq!(taken(&f), 5);
        // Ten taken: the burst.
        assert_eq!(f.try_take(0, 2, &in_flight), Some(Ok(())));
        assert_eq!(f.try_take(0, 1, &in_flight), Some(Err(100_000_000)));
        assert_eq!(taken(&f), 7);
    }
}
