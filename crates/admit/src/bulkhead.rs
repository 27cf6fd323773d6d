//! Bulkheads: named concurrency pools, so one kind of slow work cannot take
//! the slots another kind needs.
//!
//! A model call streams for seconds to minutes; a SaaS API call takes a few
//! hundred milliseconds. In one shared pool a burst of model calls would hold
//! every slot and API calls would queue behind them. Each pool here has its
//! own slots and its own bounded waiting line, served first come first
//! served (tokio's fair semaphore).
//!
//! Within a pool, one tenant holds at most its share of the slots
//! ([`PoolConfig::max_per_tenant`], half the pool unless configured), so
//! that a tenant whose calls are slow or held on purpose (streams nobody
//! reads) cannot take the slots every other tenant needs
//! ([`Bulkhead::acquire_for`]); past its share its calls wait in the same
//! bounded line.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::time::{Instant, timeout_at};

use crate::Error;

mod registry;

pub use registry::Bulkheads;

/// One pool's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Calls running at once.
    pub max_concurrent: NonZeroUsize,
    /// Calls waiting for a slot; beyond that, [`Error::BulkheadFull`]. Zero
    /// fails fast whenever every slot is busy.
    pub max_waiting: usize,
    /// Slots one tenant may hold at once ([`Bulkhead::acquire_for`]);
    /// unset: half the pool, rounded up ([`PoolConfig::tenant_share`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_tenant: Option<NonZeroUsize>,
}

impl PoolConfig {
    /// `model`: 64 running, 128 waiting. By Little's law, in-flight = rate ×
    /// latency: the seed's per-provider limits add up to 16 requests a
    /// second, and a model call takes about 4 s, so 64 slots carry every
    /// provider at its limit at once. The limiter, not this pool, keeps each
    /// provider within its own limit.
    pub const MODEL: PoolConfig = PoolConfig::new(64, 128);
    /// `api`: 32 running, 64 waiting. The seed's SaaS limits add up to 21
    /// requests a second at about 1.5 s each at the slow end: 32 slots.
    pub const API: PoolConfig = PoolConfig::new(32, 64);
    /// `default`, for anything unclassified: 16 running, 32 waiting, small
    /// enough that unknown work cannot crowd out the known kinds.
    pub const DEFAULT: PoolConfig = PoolConfig::new(16, 32);

    /// # Panics
    ///
    /// If `max_concurrent` is zero (at compile time, in a `const`).
    pub const fn new(max_concurrent: usize, max_waiting: usize) -> Self {
        PoolConfig {
            max_concurrent: NonZeroUsize::new(max_concurrent)
                .expect("max_concurrent must be at least 1"),
            max_waiting,
            max_per_tenant: None,
        }
    }

    /// The slots one tenant may hold: `max_per_tenant`, else half the
    /// pool rounded up (so that the other tenants always have the other
    /// half), never more than the pool.
    pub fn tenant_share(&self) -> usize {
        let all = self.max_concurrent.get();
        self.max_per_tenant
            .map_or(all.div_ceil(2), NonZeroUsize::get)
            .min(all)
    }
}

/// One named pool.
#[derive(Clone)]
pub struct Bulkhead {
    inner: Arc<Pool>,
}

struct Pool {
    name: Arc<str>,
    config: PoolConfig,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    rejected: AtomicU64,
    expired: AtomicU64,
    /// Each tenant's share, while it holds or waits for a slot: an entry
    /// goes when its last holder or waiter does ([`Share`]), so the map
    /// holds at most as many tenants as there are slots and waiters.
    tenants: Mutex<HashMap<Arc<str>, TenantEntry>>,
}

/// A tenant's share of a pool's slots, and how many [`Share`]s hold it.
type TenantEntry = (Arc<Semaphore>, usize);

/// A pool's numbers, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkheadStats {
    /// Slots held.
    pub in_use: usize,
    /// Callers waiting for a slot.
    pub waiting: usize,
    /// The pool's size.
    pub max_concurrent: usize,
    /// Callers refused because the waiting line was full.
    pub rejected: u64,
    /// Callers whose deadline passed while waiting.
    pub expired: u64,
}

/// A slot in a bulkhead, given back on drop.
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct BulkheadPermit {
    _slot: OwnedSemaphorePermit,
    /// The tenant's share of the pool, given back after the slot.
    _share: Option<ShareSlot>,
    pool: Arc<str>,
}

/// One slot of a tenant's share: its permit, dropped (fields drop in
/// order) before the [`Share`] that may then remove the tenant's entry.
struct ShareSlot {
    _permit: OwnedSemaphorePermit,
    _share: Share,
}

/// A hold on a tenant's entry in [`Pool::tenants`], counted in it; the
/// last one removes the entry. A slot of the share ([`ShareSlot`]) and a
/// wait for one live within a hold.
struct Share {
    pool: Arc<Pool>,
    tenant: Arc<str>,
    semaphore: Arc<Semaphore>,
}

impl Share {
    fn of(pool: &Arc<Pool>, tenant: &str) -> Share {
        let mut tenants = lock(&pool.tenants);
        let name: Arc<str> = match tenants.get_key_value(tenant) {
            Some((name, _)) => Arc::clone(name),
            None => tenant.into(),
        };
        let share = pool.config.tenant_share();
        let entry = tenants
            .entry(Arc::clone(&name))
            .or_insert_with(|| (Arc::new(Semaphore::new(share)), 0));
        entry.1 += 1;
        Share {
            pool: Arc::clone(pool),
            tenant: name,
            semaphore: Arc::clone(&entry.0),
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut tenants = lock(&self.pool.tenants);
        if let Some(entry) = tenants.get_mut(&self.tenant) {
            entry.1 -= 1;
            if entry.1 == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The map is changed in one step under the lock: a panic elsewhere
    // cannot leave it half-changed.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BulkheadPermit {
    /// The pool the slot belongs to.
    pub fn pool(&self) -> &str {
        &self.pool
    }
}

/// Counts a caller in the waiting line for as long as it waits, even if its
/// future is dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Bulkhead {
    /// A pool named `name`.
    pub fn new(name: impl Into<Arc<str>>, config: PoolConfig) -> Self {
        Bulkhead {
            inner: Arc::new(Pool {
                name: name.into(),
                config,
                slots: Arc::new(Semaphore::new(config.max_concurrent.get())),
                waiting: AtomicUsize::new(0),
                rejected: AtomicU64::new(0),
                expired: AtomicU64::new(0),
                tenants: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Takes a slot, waiting in line until `deadline` if none is free.
    ///
    /// # Errors
    ///
    /// [`Error::BulkheadFull`] if the waiting line is full,
    /// [`Error::DeadlineExceeded`] if `deadline` passes first,
    /// [`Error::Closed`] once the pool is closed.
    pub async fn acquire(&self, deadline: Instant) -> Result<BulkheadPermit, Error> {
        let slot = self.take(&self.inner.slots, deadline).await?;
        Ok(self.permit(slot, None))
    }

    /// [`acquire`](Self::acquire) for `tenant`: it first takes a slot of
    /// the tenant's share ([`PoolConfig::tenant_share`]), waiting in the
    /// same line (and within the same `deadline`) while the tenant holds
    /// its whole share, then a slot of the pool. `None`: no share applies
    /// (one trusted caller).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_for(
        &self,
        tenant: Option<&str>,
        deadline: Instant,
    ) -> Result<BulkheadPermit, Error> {
        let Some(tenant) = tenant else {
            return self.acquire(deadline).await;
        };
        let share = Share::of(&self.inner, tenant);
        let own = self.take(&share.semaphore, deadline).await?;
        let own = ShareSlot {
            _permit: own,
            _share: share,
        };
        let slot = self.take(&self.inner.slots, deadline).await?;
        Ok(self.permit(slot, Some(own)))
    }

    /// A permit of `slots` (the pool's, or a tenant's share), waiting in
    /// the pool's line until `deadline` if none is free.
    async fn take(
        &self,
        slots: &Arc<Semaphore>,
        deadline: Instant,
    ) -> Result<OwnedSemaphorePermit, Error> {
        let pool = &*self.inner;
        match Arc::clone(slots).try_acquire_owned() {
            Ok(slot) => return Ok(slot),
            Err(TryAcquireError::Closed) => return Err(Error::Closed),
            Err(TryAcquireError::NoPermits) => {}
        }
        let max = pool.config.max_waiting;
        if pool
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < max).then_some(w + 1)
            })
            .is_err()
        {
            pool.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(Error::BulkheadFull {
                pool: Arc::clone(&pool.name),
            });
        }
        let _waiting = Waiting(&pool.waiting);
        match timeout_at(deadline, Arc::clone(slots).acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(_closed)) => Err(Error::Closed),
            Err(_elapsed) => {
                pool.expired.fetch_add(1, Ordering::Relaxed);
                Err(Error::DeadlineExceeded)
            }
        }
    }

    /// Tenants that hold or wait for a slot now (each keeps an entry
    /// until its last slot goes back).
    pub fn tenants(&self) -> usize {
        lock(&self.inner.tenants).len()
    }

    /// Takes a slot if one is free now.
    ///
    /// # Errors
    ///
    /// [`Error::BulkheadFull`] if every slot is held, [`Error::Closed`] once
    /// the pool is closed.
    pub fn try_acquire(&self) -> Result<BulkheadPermit, Error> {
        match Arc::clone(&self.inner.slots).try_acquire_owned() {
            Ok(slot) => Ok(self.permit(slot, None)),
            Err(TryAcquireError::Closed) => Err(Error::Closed),
            Err(TryAcquireError::NoPermits) => {
                self.inner.rejected.fetch_add(1, Ordering::Relaxed);
                Err(Error::BulkheadFull {
                    pool: Arc::clone(&self.inner.name),
                })
            }
        }
    }

    fn permit(&self, slot: OwnedSemaphorePermit, share: Option<ShareSlot>) -> BulkheadPermit {
        BulkheadPermit {
            _slot: slot,
            _share: share,
            pool: Arc::clone(&self.inner.name),
        }
    }

    /// Wakes every waiter with [`Error::Closed`] and refuses new callers.
    /// Held slots stay valid until dropped.
    pub fn close(&self) {
        self.inner.slots.close();
    }

    /// The pool's numbers now.
    pub fn stats(&self) -> BulkheadStats {
        let pool = &*self.inner;
        let max = pool.config.max_concurrent.get();
        BulkheadStats {
            in_use: max.saturating_sub(pool.slots.available_permits()),
            waiting: pool.waiting.load(Ordering::Acquire),
            max_concurrent: max,
            rejected: pool.rejected.load(Ordering::Relaxed),
            expired: pool.expired.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}

impl fmt::Debug for BulkheadPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadPermit")
            .field("pool", &self.pool)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_with_unknown_keys_named() {
        let c: PoolConfig =
            serde_json::from_str(r#"{"max_concurrent": 3, "max_waiting": 1}"#).unwrap();
        assert_eq!(c, PoolConfig::new(3, 1));
        let err = serde_json::from_str::<PoolConfig>(
            r#"{"max_concurrent": 3, "max_waiting": 1, "size": 2}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("size"), "{err}");
    }
}
