//! A per-thread cache of resources looked up by name, so that
//! [`Limiter::check`](crate::Limiter::check) on a name reaches the
//! resource's lock-free path without taking a lock of the map.
//!
//! A slot holds the resource itself. It cannot hand out a stale one: a
//! resource dropped from the map (evicted or removed) has its fast path
//! shut for good, so a call through a stale slot falls back to the map
//! and refreshes the slot. Slots do not count as users when the map
//! sweeps idle resources ([`Resource::cached`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::limiter::Inner;
use crate::meter::Nanos;
use crate::resource::Resource;

/// Slots per thread (direct-mapped by the name's hash; a power of two).
const SLOTS: usize = 64;

struct Slot {
    limiter: u64,
    resource: Arc<Resource>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Before the reference goes, so that a sweep never counts fewer
        // users than there are.
        self.resource.cached.fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    static CACHE: RefCell<[Option<Slot>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

/// Takes `cost` from `name` on its lock-free path if this thread has the
/// resource cached: `None` when it has not, or the path is shut.
#[inline]
pub(crate) fn try_take(
    inner: &Inner,
    name: &str,
    now: Nanos,
    cost: u64,
) -> Option<Result<(), Nanos>> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            let slot = c[index(name)].as_ref()?;
            if slot.limiter != inner.id || !same(slot.resource.name.as_bytes(), name.as_bytes()) {
                return None;
            }
            slot.resource.try_take(now, cost)
        })
        .ok()
        .flatten()
}

/// The resource `name` if this thread has it cached: a reference of the
/// caller's own, which may be stale (dropped from the map since; see
/// [`Inner::take_cached`]).
#[inline]
pub(crate) fn lookup(inner: &Inner, name: &str) -> Option<Arc<Resource>> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            let slot = c[index(name)].as_ref()?;
            if slot.limiter != inner.id || !same(slot.resource.name.as_bytes(), name.as_bytes()) {
                return None;
            }
            Some(slot.resource.clone())
        })
        .ok()
        .flatten()
}

thread_local! {
    /// Misses since this thread last remembered a resource in a taken slot.
    static MISSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Misses between two resources remembered in slots already taken: with
/// many more names than slots (a keyed limit's 100k sessions) every call
/// misses, and replacing a slot each time (a reference taken, another
/// dropped) would cost more than the cache saves; a name called often is
/// still remembered soon.
const REMEMBER_EVERY: u32 = 16;

/// Whether a name that missed should be remembered: always into an empty
/// slot, else one miss in [`REMEMBER_EVERY`].
#[inline]
pub(crate) fn worth_remembering(name: &str) -> bool {
    let empty = CACHE
        .try_with(|c| c.try_borrow().is_ok_and(|c| c[index(name)].is_none()))
        .unwrap_or(false);
    if empty {
        return true;
    }
    MISSES
        .try_with(|m| {
            let n = m.get().wrapping_add(1);
            m.set(n);
            n % REMEMBER_EVERY == 0
        })
        .unwrap_or(false)
}

/// Remembers `resource`, just looked up in the map, for this thread.
pub(crate) fn remember(inner: &Inner, resource: Arc<Resource>) {
    let _ = CACHE.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let slot = &mut c[index(&resource.name)];
        if let Some(s) = slot
            && Arc::ptr_eq(&s.resource, &resource)
        {
            return;
        }
        resource.cached.fetch_add(1, Ordering::Relaxed);
        let old = slot.replace(Slot {
            limiter: inner.id,
            resource,
        });
        drop(c);
        drop(old);
    });
}

/// The slot for a name: a cheap mix of its length and its first and last
/// eight bytes (names that differ only in the middle share a slot, which
/// costs misses, never a wrong answer: the name is compared in full).
#[inline]
fn index(name: &str) -> usize {
    let b = name.as_bytes();
    let (head, tail) = match b.len() {
        8.. => (word(&b[..8]), word(&b[b.len() - 8..])),
        _ => (small(b), 0),
    };
    let mixed = (head ^ tail.rotate_left(29) ^ b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The top bits, as many as SLOTS needs.
    (mixed >> (64 - SLOTS.trailing_zeros())) as usize
}

#[inline]
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// Byte equality, inlined eight bytes at a time (names are short; a call
/// to `memcmp` costs as much as the comparison).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return small(a) == small(b);
    }
    let mut i = 0;
    while i + 8 <= n {
        if word(&a[i..i + 8]) != word(&b[i..i + 8]) {
            return false;
        }
        i += 8;
    }
    // The last eight bytes, overlapping what was compared.
    word(&a[n - 8..]) == word(&b[n - 8..])
}

/// Up to seven bytes as one word.
#[inline]
fn small(b: &[u8]) -> u64 {
    b.iter().fold(0, |h, x| h << 8 | u64::from(*x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_in_full() {
        assert!(same(b"session:00000001", b"session:00000001"));
        assert!(!same(b"session:00000001", b"session:00000002"));
        assert!(!same(b"session:0000000", b"session:00000001"));
        assert!(same(b"", b""));
        assert!(!same(b"openai/gpt-4o-mini", b"openai/gpt-4o-mino"));
        assert!(!same(b"openai/gpt-4o-mini", b"Openai/gpt-4o-mini"));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd"));
        assert!(!same(b"12345678", b"12345679"));
        assert!(index("a") < SLOTS && index("openai/gpt-4o-mini") < SLOTS);
    }
}
