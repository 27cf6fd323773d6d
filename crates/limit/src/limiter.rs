//! [`Limiter`]: keyed resources created from rules, and everything callers
//! do with them.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use foldhash::fast::RandomState;

use crate::acquire::Acquire;
use crate::adaptive::{AdaptiveConfig, CapacityChange, Policy};
use crate::clock::{Clock, FastClock, TokioClock};
use crate::grant::Grant;
use crate::headers::RateLimitHeaders;
use crate::leases::Leases;
use crate::registry::{Entry, Shard, read};
use crate::resource::{Answer, Resource, Shared, lock};
use crate::{Capacity, Error, Limit, Rules};

/// Ids of limiters, for per-thread caches.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Resources per shard before the first idle sweep of that shard.
pub(crate) const FIRST_SWEEP: usize = 64;

/// The in-process rate limiter. Cheap to clone: clones share everything.
///
/// See the crate documentation for an overview and an example.
#[derive(Clone)]
pub struct Limiter {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Unique in the process: names the limiter in per-thread caches.
    pub(crate) id: u64,
    pub(crate) shared: Arc<Shared>,
    pub(crate) rules: RwLock<Rules>,
    pub(crate) shards: Box<[Mutex<Shard>]>,
    pub(crate) hasher: RandomState,
    pub(crate) tickets: AtomicU64,
    pub(crate) closed: AtomicBool,
    pub(crate) leases: Mutex<Leases>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("resources", &self.len())
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Builds a [`Limiter`].
#[derive(Debug)]
pub struct LimiterBuilder {
    rules: Rules,
    clock: Arc<dyn Clock>,
    /// The clock, when it is a [`FastClock`]: read without a virtual call.
    fast_clock: Option<FastClock>,
    adaptive: AdaptiveConfig,
    shards: usize,
}

impl LimiterBuilder {
    /// The rules resources are created from (default: none).
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// The clock (default: [`TokioClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.fast_clock = (&clock as &dyn std::any::Any)
            .downcast_ref::<FastClock>()
            .cloned();
        self.clock = Arc::new(clock);
        self
    }

    /// How 429s reduce capacity and how it recovers.
    pub fn adaptive(mut self, adaptive: AdaptiveConfig) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Lock shards of the resource map (rounded up to a power of two;
    /// default 64).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.max(1).next_power_of_two();
        self
    }

    /// The limiter.
    ///
    /// # Errors
    /// The first invalid limit in the rules, or an invalid adaptive config.
    pub fn build(self) -> Result<Limiter, Error> {
        self.rules.validate()?;
        self.adaptive.validate()?;
        let shards = (0..self.shards)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashSet::with_hasher(RandomState::default()),
                    limits: HashMap::with_hasher(RandomState::default()),
                    sweep_at: FIRST_SWEEP,
                })
            })
            .collect();
        Ok(Limiter {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                shared: Arc::new(Shared::new(self.clock, self.fast_clock, self.adaptive)),
                rules: RwLock::new(self.rules),
                shards,
                hasher: RandomState::default(),
                tickets: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                leases: Mutex::new(Leases::default()),
            }),
        })
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Idle resources dropped (they come back from their rule, full).
    pub evicted: usize,
    /// Held grants whose lease ran out, released.
    pub expired_leases: usize,
    /// Resources left.
    pub resources: usize,
}

impl Limiter {
    /// A limiter on tokio's clock with default adaptive control.
    ///
    /// # Errors
    /// The first invalid limit in `rules`.
    pub fn new(rules: Rules) -> Result<Limiter, Error> {
        Limiter::builder().rules(rules).build()
    }

    /// A builder, for another clock or adaptive configuration.
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder {
            rules: Rules::new(),
            clock: Arc::new(TokioClock),
            fast_clock: None,
            adaptive: AdaptiveConfig::default(),
            shards: 64,
        }
    }

    /// Takes `cost` from `resource` now, or says how long to wait; gives no
    /// grant (nothing to release or settle), like governor's `check`. On an
    /// in-flight limit it only tells whether a slot is free.
    ///
    /// # Errors
    /// [`Error::RateLimited`] with the wait; [`Error::InsufficientCapacity`]
    /// when `cost` can never fit; [`Error::UnknownResource`];
    /// [`Error::Closed`].
    pub fn check(&self, resource: &str, cost: u64) -> Result<(), Error> {
        let inner = &self.inner;
        let now = inner.shared.now();
        if let Some(taken) = crate::cache::try_take(inner, resource, now, cost) {
            return taken.map_err(|wait| crate::handle::refused(resource, wait));
        }
        if inner.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let remember = crate::cache::worth_remembering(resource);
        let hash = inner.hasher.hash_one(resource);
        if let Some((taken, res)) = inner.take_existing(resource, hash, now, cost, remember) {
            if let Some(res) = res {
                crate::cache::remember(inner, res);
            }
            return taken.map_err(|wait| crate::handle::refused(resource, wait));
        }
        // Not there, or its lock-free path shut (which `create` finds).
        let res = inner.create(resource, hash, None)?;
        // Read again: a resource just created is full as of its creation,
        // which is later than `now`.
        let out = crate::handle::check_at(inner, &res, inner.shared.now(), cost);
        crate::cache::remember(inner, res);
        out
    }

    /// Takes `cost` from `resource` now without waiting, or says how long
    /// to wait. Never jumps ahead of waiters queued by [`Limiter::acquire`].
    ///
    /// # Errors
    /// As [`Limiter::check`].
    pub fn try_acquire(&self, resource: &str, cost: u64) -> Result<Grant, Error> {
        let inner = &self.inner;
        if let Some(res) = crate::cache::lookup(inner, resource)
            && let Some(out) = crate::handle::try_acquire_cached(inner, res, cost)
        {
            return out;
        }
        let res = inner.resource(resource)?;
        if crate::cache::worth_remembering(resource) {
            crate::cache::remember(inner, res.clone());
        }
        crate::handle::try_acquire(inner, res, cost)
    }

    /// Takes from several resources at once, all or nothing, without
    /// waiting.
    ///
    /// # Errors
    /// As [`Limiter::check`], for the first resource that refuses (the
    /// retry-after is the longest wait among them).
    pub fn try_acquire_many(&self, needs: &[(&str, u64)]) -> Result<Grant, Error> {
        let needs = self.inner.needs(needs)?;
        let out = crate::acquire::try_all(&self.inner, &needs);
        self.inner.shared.dispatch();
        out
    }

    /// Waits until `cost` can be taken from `resource`, in FIFO order, or
    /// until `deadline` (tokio time; `None` waits as long as it takes).
    ///
    /// A wait that is known to end after the deadline fails at once with
    /// [`Error::DeadlinePassed`] and the wait it would have needed. Dropping
    /// the future leaves the queue and holds nothing.
    pub fn acquire(
        &self,
        resource: &str,
        cost: u64,
        deadline: Option<tokio::time::Instant>,
    ) -> Acquire {
        self.acquire_many(&[(resource, cost)], deadline)
    }

    /// Waits until every `(resource, cost)` can be taken at once.
    ///
    /// Strategy: nothing is taken until everything can be, so no capacity
    /// is spent on one resource while waiting on another; the waiter queues
    /// on every resource under one ticket drawn from a counter global to the
    /// limiter, and every queue is ordered by ticket, so the oldest waiter
    /// is at the head of all its queues and there is no deadlock. Locks are
    /// taken in name order.
    pub fn acquire_many(
        &self,
        needs: &[(&str, u64)],
        deadline: Option<tokio::time::Instant>,
    ) -> Acquire {
        let needs = self.inner.needs(needs);
        Acquire::new(self.inner.clone(), needs, deadline)
    }

    /// Configures `resource` at `capacity` per `window`, keeping the
    /// algorithm and the burst's ratio to capacity of its rule (a token
    /// bucket bursting to capacity when there is no rule).
    ///
    /// A new resource starts full; an existing one keeps its state and has
    /// what is available capped at the new maximum. Queued waiters see the
    /// new capacity at once. Adaptive reductions and pauses are forgotten:
    /// the operator's number wins. A zero capacity or window is rejected
    /// (to drop a resource use [`Limiter::remove`]).
    ///
    /// # Errors
    /// [`Error::InvalidCapacity`], [`Error::InvalidWindow`],
    /// [`Error::Closed`].
    pub fn set_capacity(
        &self,
        resource: &str,
        capacity: u64,
        window: Duration,
    ) -> Result<(), Error> {
        let base = read(&self.inner.rules)
            .resolve(resource)
            .unwrap_or(Limit::new(capacity, window));
        let base = self
            .inner
            .existing(resource)
            .map_or(base, |r| *r.lock().configured());
        self.set_limit(resource, base.scaled_to(capacity, window))
    }

    /// Configures `resource` with `limit` (any algorithm), as
    /// [`Limiter::set_capacity`] does.
    ///
    /// # Errors
    /// As [`Limiter::set_capacity`].
    pub fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        limit.validate()?;
        let inner = &self.inner;
        let now = inner.shared.now();
        let res = inner.resource_or(resource, Some(limit))?;
        res.lock().configure(limit, now, &inner.shared, resource);
        inner.shared.dispatch();
        Ok(())
    }

    /// Drops `resource`: queued waiters get [`Error::Closed`]; later use
    /// recreates it from the rules.
    pub fn remove(&self, resource: &str) -> bool {
        let shard = self.inner.shard(resource);
        let removed = lock(shard).map.take(resource.as_bytes());
        if let Some(Entry(r)) = &removed {
            let mut st = r.lock();
            st.closed = true;
            st.detached = true;
            st.wake_all();
        }
        removed.is_some()
    }

    /// The state of `resource`; one that does not exist yet reports the
    /// fresh state its rule would give it.
    ///
    /// # Errors
    /// [`Error::UnknownResource`] when no rule matches.
    pub fn get_capacity(&self, resource: &str) -> Result<Capacity, Error> {
        let inner = &self.inner;
        let now = inner.shared.now();
        let cap = match inner.existing(resource) {
            Some(r) => {
                let mut st = r.lock();
                st.tick(now, &inner.shared, resource);
                st.capacity(resource, now, &inner.shared)
            }
            None => {
                let limit = inner.rule(resource)?;
                Resource::new(resource, Arc::new(limit), now, false, inner.shared.clone())
                    .lock()
                    .capacity(resource, now, &inner.shared)
            }
        };
        inner.shared.dispatch();
        Ok(cap)
    }

    /// The state of every live resource, by name.
    pub fn capacities(&self) -> Vec<Capacity> {
        let inner = &self.inner;
        let now = inner.shared.now();
        let mut all: Vec<Arc<Resource>> = inner
            .shards
            .iter()
            .flat_map(|s| lock(s).map.iter().map(|e| e.0.clone()).collect::<Vec<_>>())
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        let out = all
            .iter()
            .map(|r| {
                let mut st = r.lock();
                st.tick(now, &inner.shared, &r.name);
                st.capacity(&r.name, now, &inner.shared)
            })
            .collect();
        inner.shared.dispatch();
        out
    }

    /// An upstream answered 429 for `resource`: capacity is cut by the
    /// reduce factor (at most once per cooldown) and the resource pauses
    /// for `retry_after`, capped. Returns the change, if capacity changed.
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub fn report_throttled(
        &self,
        resource: &str,
        retry_after: Option<Duration>,
    ) -> Result<Option<CapacityChange>, Error> {
        let inner = &self.inner;
        let res = inner.resource(resource)?;
        let now = inner.shared.now();
        let change = {
            let mut st = res.lock();
            st.tick(now, &inner.shared, resource);
            st.throttle(now, retry_after, &inner.shared, resource)
        };
        inner.shared.dispatch();
        Ok(change)
    }

    /// Brings `resource` in step with an upstream that reports `remaining`
    /// left, resetting in `reset`: no more than `remaining` is available
    /// from now, and at zero the resource pauses until the reset (capped).
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub fn sync(
        &self,
        resource: &str,
        remaining: u64,
        reset: Option<Duration>,
    ) -> Result<(), Error> {
        self.sync_since(resource, remaining, reset, None)
    }

    /// [`Limiter::sync`], reading `remaining` as of the call `grant` made
    /// when the grant holds `resource` (see [`Limiter::observe_answer`]).
    fn sync_since(
        &self,
        resource: &str,
        remaining: u64,
        reset: Option<Duration>,
        grant: Option<&Grant>,
    ) -> Result<(), Error> {
        let inner = &self.inner;
        let res = inner.resource(resource)?;
        let now = inner.shared.now();
        // Only the same resource object counts: one evicted and created
        // again since the grant starts a new count.
        let since = grant.and_then(|g| g.held(&res)).map(|h| (h.stamp, h.taken));
        res.lock().sync(now, remaining, reset, &inner.shared, since);
        Ok(())
    }

    /// Applies parsed upstream headers: the request quota to `requests`,
    /// the token quota to `tokens` (no more than `remaining` available), and
    /// on `status` 429 a pause until the reported reset and a throttle of
    /// `requests` with the reported Retry-After.
    ///
    /// # Errors
    /// As [`Limiter::sync`].
    pub fn observe(
        &self,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
    ) -> Result<(), Error> {
        self.observe_inner(requests, tokens, status, headers, None)
    }

    /// [`Limiter::observe`] for the answer to a call made under `grant`.
    ///
    /// An upstream counts what it has left when the call arrives and says
    /// so in the answer, rounded down, a round trip later. Meanwhile it has
    /// refilled, and this limiter has granted other calls. Clamping to the
    /// bare count would throw away up to a token of refill per answer, and
    /// under steady load that alone costs a third of the capacity. So the
    /// count is read as "fewer than `remaining + 1` at the grant": no more
    /// than that plus the refill since, minus what was granted here since,
    /// is left available. A limiter in step with its upstream is never
    /// clamped; one that is ahead (another client shares the quota) falls
    /// back to within about a token of it.
    ///
    /// # Errors
    /// As [`Limiter::sync`].
    pub fn observe_answer(
        &self,
        grant: &Grant,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
    ) -> Result<(), Error> {
        self.observe_inner(requests, tokens, status, headers, Some(grant))
    }

    fn observe_inner(
        &self,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
        grant: Option<&Grant>,
    ) -> Result<(), Error> {
        let pairs = [
            (requests, headers.requests.as_ref()),
            (tokens, headers.tokens.as_ref()),
        ];
        for (resource, quota) in pairs {
            // Only a refusal pauses until the reset: on a success, providers
            // report the reset of a *full* bucket, and pausing that long
            // would stall a resource that refills continuously.
            if let (Some(resource), Some(q)) = (resource, quota)
                && let Some(remaining) = q.remaining
            {
                let reset = q.reset.filter(|_| status == 429);
                self.sync_since(resource, remaining, reset, grant)?;
            }
        }
        let inner = &self.inner;
        if inner.shared.adaptive.policy == Policy::Seed {
            if status == 429
                && let Some(resource) = requests.or(tokens)
            {
                self.report_throttled(resource, headers.throttle_wait())?;
            }
            return Ok(());
        }
        // The request resource hears every answer (its rate may be
        // announced); the token resource only a 429 that is its own.
        let Some(resource) = requests.or(tokens.filter(|_| status == 429)) else {
            return Ok(());
        };
        let res = inner.resource(resource)?;
        let now = inner.shared.now();
        let sent_at = grant.and_then(|g| g.held(&res)).map(|h| h.stamp);
        let answer = Answer {
            status,
            headers,
            requests: requests.is_some(),
            sent_at,
        };
        {
            let mut st = res.lock();
            st.tick(now, &inner.shared, resource);
            st.answered(now, answer, &inner.shared, resource);
        }
        inner.shared.dispatch();
        Ok(())
    }

    /// Calls `f` on every capacity change (reductions, recovery steps,
    /// configuration), outside the limiter's locks: `f` may use the limiter.
    /// Recovery is applied lazily, when a resource is next used or swept, so
    /// run [`Limiter::spawn_maintenance`] for timely reports.
    pub fn on_change(&self, f: impl Fn(&CapacityChange) + Send + Sync + 'static) {
        self.inner.shared.add_listener(Arc::new(f));
    }

    /// Closes the limiter: every waiter wakes with [`Error::Closed`], and so
    /// does every later call.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        for shard in self.inner.shards.iter() {
            for Entry(r) in lock(shard).map.iter() {
                let mut st = r.lock();
                st.closed = true;
                st.wake_all();
            }
        }
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Drops idle resources (full, nothing held or queued, not adapting,
    /// not configured explicitly: indistinguishable from what their rule
    /// would create, so nothing is lost), applies due recovery steps and
    /// releases expired leases. Runs by itself as resources are created
    /// (leaving keys full for less than a second, which may well be called
    /// again), so memory stays bounded by the keys *active* within one
    /// refill time and a second.
    pub fn sweep(&self) -> SweepStats {
        let inner = &self.inner;
        let now = inner.shared.now();
        let mut stats = SweepStats::default();
        for shard in inner.shards.iter() {
            let mut s = lock(shard);
            stats.evicted += s.sweep(now, 0, &inner.shared);
            stats.resources += s.map.len();
        }
        stats.expired_leases = self.expire_leases(now);
        inner.shared.dispatch();
        stats
    }

    /// Sweeps every `every` in a background task that ends when the last
    /// clone of the limiter is dropped. Needs a tokio runtime.
    pub fn spawn_maintenance(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                Limiter { inner }.sweep();
            }
        })
    }

    /// Whether `resource` is live (used recently or configured).
    pub fn contains(&self, resource: &str) -> bool {
        self.inner.existing(resource).is_some()
    }

    /// Live resources.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// True when no resource is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces the rules; live resources keep their limits until evicted
    /// or set explicitly.
    ///
    /// # Errors
    /// The first invalid limit.
    pub fn set_rules(&self, rules: Rules) -> Result<(), Error> {
        rules.validate()?;
        *self.inner.rules.write().unwrap_or_else(|e| e.into_inner()) = rules;
        Ok(())
    }
}
