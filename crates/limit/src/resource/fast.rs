//! The lock-free path of a bucket resource (token bucket or GCRA) that
//! nobody waits on: one compare-and-swap on the bucket's state, as
//! governor does, instead of the resource's lock.
//!
//! The state is one word: the theoretical arrival time (see
//! `meter/bucket.rs`), a version, and a `SHUT` bit. Whoever holds the
//! resource's lock shuts the fast path first and owns the arrival time
//! until it lets go (see [`super::Locked`]); it opens the path again only
//! when nothing else needs the lock: nobody queued (so a fast caller can
//! never jump ahead of a waiter), no grant held (whose settle and
//! `observe_answer` count what was taken since), no adaptive state (pauses
//! and reductions), not closed or dropped from the map. Opening bumps the
//! version, so a fast caller that read the word before the lock was taken
//! fails its compare-and-swap even if the arrival time came back the same,
//! and reads the parameters again.

use std::sync::atomic::{AtomicU64, Ordering};

use portable_atomic::AtomicU128;

use crate::meter::{Nanos, Params};

/// Bits of the arrival time; the rest is the version and `SHUT`.
const TAT_BITS: u32 = 112;
const TAT_MASK: u128 = (1 << TAT_BITS) - 1;
const SHUT: u128 = 1 << 127;
const VERSION_ONE: u128 = 1 << TAT_BITS;
const VERSION_MASK: u128 = !TAT_MASK & !SHUT;
/// Parameters whose products stay far below [`TAT_MASK`]; larger ones
/// (absurd limits) stay on the locked path.
const PRODUCT_MAX: u128 = 1 << 100;

#[derive(Debug)]
pub(crate) struct Fast {
    word: AtomicU128,
    capacity: AtomicU64,
    window: AtomicU64,
    burst: AtomicU64,
    margin: AtomicU64,
}

impl Fast {
    /// Shut: the first unlock opens it if the resource allows.
    pub(crate) fn new() -> Self {
        Fast {
            word: AtomicU128::new(SHUT),
            capacity: AtomicU64::new(0),
            window: AtomicU64::new(0),
            burst: AtomicU64::new(0),
            margin: AtomicU64::new(0),
        }
    }

    /// Takes `cost` at `now` without the lock: `Some(Ok)` taken,
    /// `Some(Err(wait))` refused, `None` when the locked path must decide
    /// (shut, or a cost above the burst).
    #[inline]
    pub(crate) fn try_take(&self, now: Nanos, cost: u64) -> Option<Result<(), Nanos>> {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if word & SHUT != 0 {
                return None;
            }
            let p = Params {
                capacity: self.capacity.load(Ordering::Relaxed),
                window: self.window.load(Ordering::Relaxed),
                burst: self.burst.load(Ordering::Relaxed),
                margin: self.margin.load(Ordering::Relaxed),
            };
            if cost > p.burst {
                return None;
            }
            match p.take(word & TAT_MASK, now, cost) {
                Ok(tat) if tat <= TAT_MASK => {
                    let next = (word & VERSION_MASK) | tat;
                    match self.word.compare_exchange_weak(
                        word,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Some(Ok(())),
                        Err(now_word) => word = now_word,
                    }
                }
                Ok(_) => return None,
                Err(wait) => {
                    // A refusal changes nothing; it stands if the word (and
                    // so the parameters read) did not change meanwhile.
                    let again = self.word.load(Ordering::Acquire);
                    if again == word {
                        return Some(Err(wait.unwrap_or(u64::MAX)));
                    }
                    word = again;
                }
            }
        }
    }

    /// Shuts the fast path (lock holders only); the arrival time if the
    /// fast path had it, `None` if it was shut already.
    pub(crate) fn shut(&self) -> Option<u128> {
        if self.word.load(Ordering::Acquire) & SHUT != 0 {
            return None;
        }
        let word = self.word.fetch_or(SHUT, Ordering::AcqRel);
        Some(word & TAT_MASK)
    }

    /// Opens the fast path at `tat` under `params` (lock holders only, the
    /// path shut); false, leaving it shut, when they are too large for it.
    pub(crate) fn open(&self, tat: u128, params: &Params) -> bool {
        let products = [
            params.tau(),
            params.capacity as u128 * params.window as u128,
            params.margin as u128 * params.capacity as u128,
        ];
        if tat > TAT_MASK || products.iter().any(|p| *p >= PRODUCT_MAX) {
            return false;
        }
        self.capacity.store(params.capacity, Ordering::Relaxed);
        self.window.store(params.window, Ordering::Relaxed);
        self.burst.store(params.burst, Ordering::Relaxed);
        self.margin.store(params.margin, Ordering::Relaxed);
        let word = self.word.load(Ordering::Relaxed);
        let version = word.wrapping_add(VERSION_ONE) & VERSION_MASK;
        self.word.store(version | tat, Ordering::Release);
        true
    }
}
