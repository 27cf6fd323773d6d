//! The map of live resources: sharded, created from rules on first use,
//! swept of idle entries as it grows.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use foldhash::fast::RandomState;

use crate::acquire::Need;
use crate::limiter::{FIRST_SWEEP, Inner};
use crate::meter::Nanos;
use crate::resource::{Locked, Name, Resource, Shared, State, lock};
use crate::{Error, Limit, Rules};

pub(crate) struct Shard {
    pub(crate) map: HashSet<Entry, RandomState>,
    /// The limits resources were created under, shared (a rule's many
    /// keys hold one); forgotten when it holds [`LIMITS`], which only
    /// costs the sharing.
    pub(crate) limits: HashMap<Limit, Arc<Limit>, RandomState>,
    /// Sweep idle resources when the map reaches this size.
    pub(crate) sweep_at: usize,
}

/// What [`Inner::take_existing`] answers: taken or the wait, and the
/// resource when asked for.
pub(crate) type TakenExisting = (Result<(), Nanos>, Option<Arc<Resource>>);

/// Distinct creation limits a shard shares before it starts over.
const LIMITS: usize = 64;

/// A resource in the map, keyed by its name: one pointer a slot.
pub(crate) struct Entry(pub(crate) Arc<Resource>);

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `[u8]` hashes, for look-ups by a name's bytes.
        self.0.name.as_bytes().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.name.as_bytes() == other.0.name.as_bytes()
    }
}

impl Eq for Entry {}

impl Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.0.name.as_bytes()
    }
}

pub(crate) fn read(rules: &RwLock<Rules>) -> std::sync::RwLockReadGuard<'_, Rules> {
    rules.read().unwrap_or_else(|e| e.into_inner())
}

/// How long a sweep that creation runs leaves a plain key (see
/// [`Resource::sweep_plain`]) that has been full for less: one called again
/// that soon would only be created again. With many more keys than fit a
/// refill time (100k sessions a few milliseconds apart), evicting each as
/// soon as it refilled made nearly every call create its key anew (5x the
/// cost of a call that finds it). Memory stays bounded by the keys active
/// within a refill time and this.
pub(crate) const KEEP_IDLE: Nanos = 1_000_000_000;

impl Shard {
    /// Drops idle resources; plain keys only once they have been full for
    /// `keep` (see [`KEEP_IDLE`]).
    pub(crate) fn sweep(&mut self, now: Nanos, keep: Nanos, shared: &Shared) -> usize {
        let before = self.map.len();
        self.map.retain(|Entry(r)| {
            let name = &r.name;
            // A clone outside the map (and the threads' caches) means
            // someone is about to use it.
            let cached = r.cached.load(Ordering::Relaxed) as usize;
            if Arc::strong_count(r).saturating_sub(cached) > 1 {
                return true;
            }
            // A resource in use keeps its state; a plain one is read from
            // its word (see `Resource::sweep_plain`).
            if let Some(idle) = r.sweep_plain(now, keep) {
                return !idle;
            }
            match r.try_lock() {
                Some(mut st) => {
                    st.tick(now, shared, name);
                    let idle = st.is_idle(now);
                    st.detached = idle;
                    st.shed = true;
                    !idle
                }
                None => true,
            }
        });
        self.sweep_at = (self.map.len() * 2).max(FIRST_SWEEP);
        before - self.map.len()
    }
}

impl Inner {
    pub(crate) fn shard(&self, name: &str) -> &Mutex<Shard> {
        self.shard_of(self.hasher.hash_one(name))
    }

    pub(crate) fn shard_of(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[(hash >> 32) as usize & (self.shards.len() - 1)]
    }

    pub(crate) fn rule(&self, name: &str) -> Result<Limit, Error> {
        read(&self.rules)
            .resolve(name)
            .ok_or_else(|| Error::UnknownResource(name.to_owned()))
    }

    /// Takes `cost` at `now` from `name`'s lock-free path under the map's
    /// lock, without a reference of the caller's own: `None` when there is
    /// no such resource or its path is shut. With the answer, the resource
    /// if `remember` asks for it (for the thread's cache).
    #[inline]
    pub(crate) fn take_existing(
        &self,
        name: &str,
        hash: u64,
        now: Nanos,
        cost: u64,
        remember: bool,
    ) -> Option<TakenExisting> {
        let shard = lock(self.shard_of(hash));
        let Entry(r) = shard.map.get(name.as_bytes())?;
        let taken = r.try_take(now, cost)?;
        Some((taken, remember.then(|| r.clone())))
    }

    pub(crate) fn existing(&self, name: &str) -> Option<Arc<Resource>> {
        lock(self.shard(name))
            .map
            .get(name.as_bytes())
            .map(|e| e.0.clone())
    }

    /// The resource, created from its rule on first use.
    #[inline]
    pub(crate) fn resource(&self, name: &str) -> Result<Arc<Resource>, Error> {
        self.resource_or(name, None)
    }

    pub(crate) fn resource_or(
        &self,
        name: &str,
        explicit: Option<Limit>,
    ) -> Result<Arc<Resource>, Error> {
        self.resource_hashed(name, self.hasher.hash_one(name), explicit)
    }

    /// [`Inner::resource_or`] with the name's hash already computed.
    pub(crate) fn resource_hashed(
        &self,
        name: &str,
        hash: u64,
        explicit: Option<Limit>,
    ) -> Result<Arc<Resource>, Error> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        if let Some(Entry(r)) = lock(self.shard_of(hash)).map.get(name.as_bytes()) {
            return Ok(r.clone());
        }
        self.create(name, hash, explicit)
    }

    /// The resource, created from its rule (or `explicit`) unless someone
    /// has just created it: for callers that looked it up and found none.
    pub(crate) fn create(
        &self,
        name: &str,
        hash: u64,
        explicit: Option<Limit>,
    ) -> Result<Arc<Resource>, Error> {
        let shard = self.shard_of(hash);
        let limit = match explicit {
            Some(l) => l,
            None => self.rule(name)?,
        };
        let now = self.shared.now();
        let mut s = lock(shard);
        if let Some(Entry(r)) = s.map.get(name.as_bytes()) {
            return Ok(r.clone());
        }
        if s.map.len() >= s.sweep_at {
            s.sweep(now, KEEP_IDLE, &self.shared);
        }
        if s.limits.len() >= LIMITS && !s.limits.contains_key(&limit) {
            s.limits.clear();
        }
        let birth = s
            .limits
            .entry(limit)
            .or_insert_with(|| Arc::new(limit))
            .clone();
        let pinned = explicit.is_some();
        let r = Arc::new(Resource::new(name, birth, now, pinned, self.shared.clone()));
        s.map.insert(Entry(r.clone()));
        Ok(r)
    }

    /// Resolves, sorts by name and merges a list of needs.
    pub(crate) fn needs(&self, needs: &[(&str, u64)]) -> Result<Vec<Need>, Error> {
        let mut out: Vec<Need> = Vec::with_capacity(needs.len());
        for (name, cost) in needs {
            out.push(Need {
                resource: self.resource(name)?,
                cost: *cost,
            });
        }
        out.sort_by(|a, b| a.resource.name.cmp(&b.resource.name));
        out.dedup_by(|later, first| {
            let same = Arc::ptr_eq(&later.resource, &first.resource);
            if same {
                first.cost = first.cost.saturating_add(later.cost);
            }
            same
        });
        Ok(out)
    }

    /// Takes `cost` at `now` if it fits, under the resource's lock; returns
    /// the take's stamp and the resource's
    /// [`taken`](crate::resource::Locked::taken) after it.
    pub(crate) fn take_now(
        &self,
        res: &Resource,
        now: Nanos,
        cost: u64,
        grant: bool,
    ) -> Result<(Nanos, u64), Error> {
        self.take_locked(&mut res.lock(), res, now, cost, grant)
    }

    /// [`Inner::take_now`] on a resource a thread's cache remembered by
    /// name: `None` if it has been dropped from the map since (evicted or
    /// removed), for the caller to look the name up again.
    #[inline]
    pub(crate) fn take_cached(
        &self,
        res: &Resource,
        now: Nanos,
        cost: u64,
    ) -> Option<Result<(Nanos, u64), Error>> {
        let mut st = res.lock();
        if st.detached {
            return None;
        }
        Some(self.take_locked(&mut st, res, now, cost, true))
    }

    #[inline]
    fn take_locked(
        &self,
        st: &mut Locked<'_>,
        res: &Resource,
        now: Nanos,
        cost: u64,
        grant: bool,
    ) -> Result<(Nanos, u64), Error> {
        st.tick(now, &self.shared, &res.name);
        refuse_never(st, &res.name, cost)?;
        if !st.waiters.is_empty() {
            let total = st.queued_cost.saturating_add(cost);
            return Err(Error::RateLimited {
                resource: res.name.to_string(),
                retry_after: st.estimate(now, total).map(Duration::from_nanos),
            });
        }
        match st.check(now, cost) {
            Ok(()) => {
                let is_inflight = matches!(st.limit.kind(), crate::Algorithm::InFlight);
                if grant {
                    let stamp = st.take(now, cost);
                    return Ok((stamp, st.count_grant()));
                }
                if !is_inflight {
                    st.take(now, cost);
                }
                Ok((now, st.taken()))
            }
            Err(wait) => Err(Error::RateLimited {
                resource: res.name.to_string(),
                retry_after: wait.map(Duration::from_nanos),
            }),
        }
    }

    pub(crate) fn next_ticket(&self) -> u64 {
        self.tickets.fetch_add(1, Ordering::Relaxed)
    }
}

/// Closed, or a cost that can never fit the configured limit.
#[inline]
pub(crate) fn refuse_never(st: &State, name: &Name, cost: u64) -> Result<(), Error> {
    if st.closed {
        return Err(Error::Closed);
    }
    let max = st.configured().max_cost();
    if cost > max {
        return Err(Error::InsufficientCapacity {
            resource: name.to_string(),
            cost,
            capacity: max,
        });
    }
    Ok(())
}
