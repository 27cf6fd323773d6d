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

/// Slots per thread (direct-mapped by the name's hash).
const SLOTS: usize = 64;

struct Slot {
    limiter: u64,
    hash: u64,
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
    static CACHE: RefCell<Vec<Option<Slot>>> = const { RefCell::new(Vec::new()) };
}

/// Takes `cost` from `name` on its lock-free path if this thread has the
/// resource cached: `None` when it has not, or the path is shut.
#[inline]
pub(crate) fn try_take(
    inner: &Inner,
    name: &str,
    hash: u64,
    now: Nanos,
    cost: u64,
) -> Option<Result<(), Nanos>> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            let slot = c.get(hash as usize % SLOTS)?.as_ref()?;
            if slot.limiter != inner.id || slot.hash != hash || *slot.resource.name != *name {
                return None;
            }
            slot.resource.fast.try_take(now, cost)
        })
        .ok()
        .flatten()
}

/// Remembers `resource`, just looked up in the map, for this thread.
pub(crate) fn remember(inner: &Inner, hash: u64, resource: Arc<Resource>) {
    let _ = CACHE.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        if c.is_empty() {
            c.resize_with(SLOTS, || None);
        }
        let slot = &mut c[hash as usize % SLOTS];
        if let Some(s) = slot
            && Arc::ptr_eq(&s.resource, &resource)
        {
            return;
        }
        resource.cached.fetch_add(1, Ordering::Relaxed);
        let old = slot.replace(Slot {
            limiter: inner.id,
            hash,
            resource,
        });
        // Dropped after the borrow: the last reference to a resource
        // holds nothing that could call back here, but keep it simple.
        drop(c);
        drop(old);
    });
}
