//! One resource: its meter, its FIFO queue of waiters, its adaptive state.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

mod answer;
mod counted;
mod fast;
mod name;

pub(crate) use answer::Answer;
pub(crate) use fast::Fast;
pub(crate) use name::Name;

use crate::Limit;
use crate::adaptive::{self, Adaptive, AdaptiveConfig, CapacityChange, ChangeReason, Cut};
use crate::clock::{Clock, FastClock};
use crate::meter::{Check, Meter, Nanos, Stamp};

/// What grants and resources need of the limiter: its time and its events.
/// Kept apart from the limiter's maps so that a grant parked in the
/// limiter's lease table does not keep the limiter alive.
pub(crate) struct Shared {
    pub(crate) clock: Arc<dyn Clock>,
    /// `clock`, when it is a [`FastClock`], for reading without a virtual
    /// call.
    fast_clock: Option<FastClock>,
    pub(crate) epoch: Instant,
    /// The clock's own count at `epoch`, if it has one (see
    /// [`Clock::count_nanos`]).
    epoch_count: Option<u64>,
    pub(crate) adaptive: AdaptiveConfig,
    events: Mutex<Vec<CapacityChange>>,
    events_pending: AtomicBool,
    #[allow(clippy::type_complexity)]
    listeners: Mutex<Vec<Arc<dyn Fn(&CapacityChange) + Send + Sync>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("clock", &self.clock)
            .field("adaptive", &self.adaptive)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        fast_clock: Option<FastClock>,
        adaptive: AdaptiveConfig,
    ) -> Self {
        let epoch_count = clock.count_nanos();
        let epoch = clock.now();
        Shared {
            clock,
            fast_clock,
            epoch,
            epoch_count,
            adaptive,
            events: Mutex::new(Vec::new()),
            events_pending: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// The jitter margin every resource starts from, in nanoseconds.
    pub(crate) fn base_margin(&self) -> Nanos {
        nanos(self.adaptive.jitter_margin)
    }

    /// Nanoseconds since the epoch on the limiter's clock.
    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        if let (Some(clock), Some(epoch)) = (&self.fast_clock, self.epoch_count) {
            return clock.count().saturating_sub(epoch);
        }
        match self.epoch_count {
            Some(epoch) => self
                .clock
                .count_nanos()
                .unwrap_or(epoch)
                .saturating_sub(epoch),
            None => {
                let d = self.clock.now().saturating_duration_since(self.epoch);
                u64::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
            }
        }
    }

    pub(crate) fn instant(&self, at: Nanos) -> Instant {
        self.epoch + Duration::from_nanos(at)
    }

    pub(crate) fn add_listener(&self, f: Arc<dyn Fn(&CapacityChange) + Send + Sync>) {
        lock(&self.listeners).push(f);
    }

    /// Queues an event; it is handed to listeners by `dispatch`, outside any
    /// resource lock, so a listener may call back into the limiter.
    fn emit(&self, change: CapacityChange) {
        lock(&self.events).push(change);
        self.events_pending.store(true, Ordering::Release);
    }

    /// Hands queued events to the listeners. Cheap when there are none.
    #[inline]
    pub(crate) fn dispatch(&self) {
        if self.events_pending.load(Ordering::Acquire) {
            self.dispatch_slow();
        }
    }

    #[cold]
    fn dispatch_slow(&self) {
        self.events_pending.store(false, Ordering::Release);
        let events = std::mem::take(&mut *lock(&self.events));
        let listeners = lock(&self.listeners).clone();
        for e in &events {
            for l in &listeners {
                l(e);
            }
        }
    }
}

/// Locks, ignoring poisoning: no code path leaves state half-updated across
/// a panic point, so the data is still consistent.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
pub(crate) struct Resource {
    pub(crate) name: Name,
    /// The lock-free path, open while nothing needs the lock.
    pub(crate) fast: Fast,
    /// References held by per-thread caches (`cache.rs`), which do not
    /// keep a resource from being swept.
    pub(crate) cached: AtomicU32,
    /// Grants held, and made to waiters not yet taken (see
    /// [`State::served`]): kept here, not in the state, so that grants on
    /// the lock-free path count themselves without the lock (see
    /// `fast.rs`). A grant counts itself in before it takes, so a count
    /// may include one about to be refused. 32 bits: four billion grants
    /// held at once are more than memory holds.
    pub(crate) in_flight: AtomicU32,
    /// The limit it was created under (shared by the resources of a rule).
    birth: Arc<Limit>,
    /// The limiter's time, for what the resource's grants do when they go
    /// or settle (a grant holds only its resources).
    pub(crate) shared: Arc<Shared>,
    /// `None` while the resource is a plain bucket under `birth` that only
    /// the fast path has needed since it was created or last swept: most
    /// keys of a large keyed limit never need more, and so cost no state.
    state: Mutex<Option<Box<State>>>,
}

impl Resource {
    /// A fresh resource holding back the limiter's margin of refill (see
    /// [`AdaptiveConfig::jitter_margin`]).
    pub(crate) fn new(
        name: &str,
        birth: Arc<Limit>,
        now: Nanos,
        pinned: bool,
        shared: Arc<Shared>,
    ) -> Self {
        let limit = *birth;
        let mut meter = Meter::new(&limit, now);
        meter.set_margin(shared.base_margin());
        let fast = Fast::new();
        // A plain bucket (most keys of a keyed limit) opens its lock-free
        // path full, and needs no state (what unlocking a fresh one would
        // leave, without building the state to drop it).
        let state = match &meter {
            Meter::Bucket(b) if !pinned && fast.open(b.tat, &b.params, false) => None,
            _ => Some(Box::new(State::new(limit, meter, pinned))),
        };
        let plain = state.is_none();
        let r = Resource {
            name: Name::new(name),
            fast,
            cached: AtomicU32::new(0),
            in_flight: AtomicU32::new(0),
            birth,
            shared,
            state: Mutex::new(state),
        };
        if !plain {
            // Unlocking opens the fast path if it can.
            r.lock().shed = true;
        }
        r
    }

    /// The state, the fast path shut until the guard goes.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_> {
        Locked::new(self, lock(&self.state))
    }

    /// [`Resource::lock`] if nobody holds the lock.
    pub(crate) fn try_lock(&self) -> Option<Locked<'_>> {
        let st = match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(Locked::new(self, st))
    }
}

impl Resource {
    /// Takes `cost` at `now` on the lock-free path (see
    /// [`Fast::try_take`]).
    #[inline]
    pub(crate) fn try_take(&self, now: Nanos, cost: u64) -> Option<Result<(), Nanos>> {
        self.fast.try_take(now, cost, &self.in_flight)
    }

    /// A grant of `cost` at `now` on the lock-free path, counted in flight
    /// (see [`Fast::try_grant`]): what was taken right after it.
    #[inline]
    pub(crate) fn try_grant(&self, now: Nanos, cost: u64) -> Option<Result<u64, Nanos>> {
        if !self.fast.is_open() {
            return None;
        }
        // Counted before it takes, so that a take meanwhile does not stop
        // counting under it.
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let out = self.fast.try_grant(now, cost, &self.in_flight);
        if !matches!(out, Some(Ok(_))) {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        out
    }

    /// For sweeps, a resource without state: whether it is idle (full,
    /// and for `keep` already), read from its word without building its
    /// state, and if so dropped from the map (`detached`, so that nothing
    /// takes from it again). `None` when it has state or its lock is busy:
    /// the sweep locks it.
    pub(crate) fn sweep_plain(&self, now: Nanos, keep: Nanos) -> Option<bool> {
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        if st.is_some() {
            return None;
        }
        let Some(tat) = self.fast.shut(self.birth.capacity()) else {
            // Not reached: without state, the path is open.
            return None;
        };
        if tat > now.saturating_sub(keep) as u128 * self.birth.capacity() as u128 {
            self.fast.reopen();
            return Some(false);
        }
        // Idle: the state records that it was dropped; it goes with the
        // resource.
        let mut meter = Meter::new(&self.birth, now);
        meter.set_margin(self.fast.margin_nanos());
        let mut state = State::new(*self.birth, meter, false);
        state.detached = true;
        *st = Some(Box::new(state));
        Some(true)
    }
}

/// A resource's state, locked. While it is held the fast path is shut and
/// the bucket's arrival time is the one in the state; dropping it opens
/// the fast path again at that time if nothing needs the lock, and drops
/// the state of a plain bucket.
pub(crate) struct Locked<'a> {
    res: &'a Resource,
    st: MutexGuard<'a, Option<Box<State>>>,
    /// Let the state of a plain bucket go on unlock (creation and sweeps
    /// do: a resource in use keeps its state rather than rebuild it at
    /// every grant).
    pub(crate) shed: bool,
}

impl<'a> Locked<'a> {
    fn new(res: &'a Resource, mut st: MutexGuard<'a, Option<Box<State>>>) -> Self {
        // The capacity the fast path was opened with, if it was.
        let capacity = match st.as_deref() {
            Some(State {
                meter: Meter::Bucket(b),
                ..
            }) => b.params.capacity,
            Some(_) => 0,
            None => res.birth.capacity(),
        };
        let tat = res.fast.shut(capacity);
        match st.as_deref_mut() {
            Some(state) => {
                if let (Some(tat), Meter::Bucket(b)) = (tat, &mut state.meter) {
                    b.tat = tat;
                }
            }
            None => {
                // No state: a plain bucket, whose fast path was open (a
                // resource lets its state go only then).
                let mut meter = Meter::new(&res.birth, 0);
                if let Meter::Bucket(b) = &mut meter {
                    b.tat = tat.unwrap_or_default();
                    b.params.margin = res.fast.margin_nanos();
                }
                *st = Some(Box::new(State::new(*res.birth, meter, false)));
            }
        }
        Locked {
            res,
            st,
            shed: false,
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(st) = self.st.as_deref() else {
            return;
        };
        let Meter::Bucket(b) = &st.meter else {
            return;
        };
        // Held grants leave the path open: they count themselves beside
        // it. Grants served to waiters but not yet taken are kept here.
        let free = st.waiters.is_empty()
            && st.served.is_empty()
            && st.adaptive.is_none()
            && !st.closed
            && !st.detached;
        let held = self.res.in_flight.load(Ordering::Acquire) != 0;
        if free
            && self.res.fast.open(b.tat, &b.params, held)
            && self.shed
            && !st.pinned
            && st.limit == *self.res.birth
        {
            // Nothing here that the fast path and `birth` do not hold.
            *self.st = None;
        }
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.st.as_deref().expect("a locked resource has its state")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.st
            .as_deref_mut()
            .expect("a locked resource has its state")
    }
}

/// A task waiting in a resource's queue; the queue is ordered by ticket,
/// which is global to the limiter (see `acquire.rs`).
#[derive(Debug)]
pub(crate) struct Waiter {
    pub(crate) cost: u64,
    pub(crate) waker: Option<Waker>,
    /// When it joined the queue: a grant is never dated before.
    pub(crate) joined: Nanos,
    /// Its deadline, if it has one: a batch never grants past it.
    pub(crate) deadline: Option<Nanos>,
    /// It waits on this resource alone, so whoever serves the queue may
    /// grant it in passing (see [`Locked::serve`]).
    pub(crate) alone: bool,
}

/// A grant made to a queued waiter by someone else's pass over the queue
/// (see [`Locked::serve`]), held until its task is polled and takes it.
#[derive(Debug)]
pub(crate) struct Served {
    pub(crate) ticket: u64,
    pub(crate) cost: u64,
    pub(crate) stamp: Stamp,
    pub(crate) taken: u64,
}

/// How far a grant to a queued waiter is dated back to when its tokens
/// came due: what a timer woken late (tokio's resolve to the millisecond)
/// and the scheduler may add. Within it, a waiter woken late is granted as
/// of when it was due, so lateness never lowers the rate; beyond it, the
/// time is lost as it would be without.
pub(crate) const LATE: Nanos = 2_000_000;

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) meter: Meter,
    /// The limit in force (reduced while adapting).
    pub(crate) limit: Limit,
    pub(crate) adaptive: Option<Box<Adaptive>>,
    pub(crate) waiters: BTreeMap<u64, Waiter>,
    /// Grants made to waiters that have not yet taken them (see
    /// [`Locked::serve`]); counted in [`Resource::in_flight`].
    pub(crate) served: Vec<Served>,
    /// Total cost of the waiters, for wait estimates of newcomers.
    pub(crate) queued_cost: u64,
    /// Configured explicitly rather than from a rule: never evicted.
    pub(crate) pinned: bool,
    pub(crate) closed: bool,
    /// No longer in the limiter's map (evicted or removed): a name looked
    /// up earlier must be looked up again.
    pub(crate) detached: bool,
}

impl State {
    fn new(limit: Limit, meter: Meter, pinned: bool) -> Self {
        State {
            meter,
            limit,
            adaptive: None,
            waiters: BTreeMap::new(),
            served: Vec::new(),
            queued_cost: 0,
            pinned,
            closed: false,
            detached: false,
        }
    }

    /// The limit recovery returns to.
    pub(crate) fn configured(&self) -> &Limit {
        self.adaptive
            .as_ref()
            .map_or(&self.limit, |a| &a.configured)
    }

    /// Applies recovery steps that have come due; called at every lock site
    /// that decides, so recovery needs no background task.
    #[inline]
    pub(crate) fn tick(&mut self, now: Nanos, shared: &Shared, name: &(impl AsRef<str> + ?Sized)) {
        if self.adaptive.is_some() {
            self.tick_slow(now, shared, name.as_ref());
        }
    }

    #[cold]
    fn tick_slow(&mut self, now: Nanos, shared: &Shared, name: &str) {
        let base = shared.base_margin();
        self.decay_margin(now, base);
        let Some(a) = self.adaptive.as_mut() else {
            return;
        };
        let cfg = &shared.adaptive;
        let (factor, interval) = match a.cut {
            Cut::Evidence => (cfg.fast_recovery_factor, cfg.fast_recovery_interval),
            _ => (cfg.recovery_factor, cfg.recovery_interval),
        };
        let ceiling = a.configured.capacity();
        let mut changed = false;
        // An announced rate moves only with the announcements.
        while matches!(a.cut, Cut::Seed | Cut::Evidence)
            && self.limit.capacity() < ceiling
            && now >= a.next_recovery
        {
            let previous = self.limit.capacity();
            let capacity = adaptive::recovered(previous, factor, ceiling);
            let at = a.next_recovery;
            a.next_recovery = a.next_recovery.saturating_add(nanos(interval));
            self.limit = a.configured.scaled_to(capacity, a.configured.window());
            self.meter.reconfigure(&self.limit, now);
            changed = true;
            shared.emit(CapacityChange {
                resource: name.to_owned(),
                previous,
                capacity,
                configured: ceiling,
                window: self.limit.window(),
                reason: ChangeReason::Recovered,
                at: shared.instant(at),
                announced_by: None,
            });
        }
        if self.limit == a.configured
            || (a.cut != Cut::Announced && self.limit.capacity() >= ceiling)
        {
            a.cut = Cut::None;
        }
        let settled = a.cut == Cut::None
            && a.paused_until <= now
            && a.margin <= base
            && a.strikes == 0
            && !a.estimate.fresh(now);
        if settled {
            // Fully recovered and quiet: nothing left to remember.
            self.limit = a.configured;
            self.adaptive = None;
        }
        if changed {
            self.wake_head();
        }
    }

    /// May `cost` go at `now`, given pauses and reductions?
    #[inline]
    pub(crate) fn check(&mut self, now: Nanos, cost: u64) -> Check {
        if let Some(a) = &self.adaptive {
            if a.paused_until > now {
                return Err(Some(a.paused_until - now));
            }
            if cost > self.limit.max_cost() {
                // Fits the configured limit but not the reduced one: wait
                // for recovery, which wakes the head.
                return Err(None);
            }
        }
        self.meter.check(now, cost)
    }

    /// The wait for `total` to be taken: a newcomer's cost plus the cost of
    /// everyone queued ahead of it.
    pub(crate) fn estimate(&mut self, now: Nanos, total: u64) -> Option<Nanos> {
        let pause = self
            .adaptive
            .as_ref()
            .map_or(0, |a| a.paused_until.saturating_sub(now));
        match self.meter.check(now + pause, total) {
            Ok(()) => Some(pause),
            Err(w) => w.map(|w| w.saturating_add(pause)),
        }
    }

    /// Wakes the first waiter: the only one that looks at the meter.
    pub(crate) fn wake_head(&self) {
        if let Some((_, w)) = self.waiters.first_key_value()
            && let Some(waker) = &w.waker
        {
            waker.wake_by_ref();
        }
    }

    pub(crate) fn wake_all(&self) {
        for w in self.waiters.values() {
            if let Some(waker) = &w.waker {
                waker.wake_by_ref();
            }
        }
    }

    /// When a grant of `cost` to a waiter that joined at `joined`, allowed
    /// at `now`, is dated: when its tokens came due, if that was after it
    /// joined and at most [`LATE`] ago (token buckets and GCRA; other
    /// meters at `now`). Dating it then rather than when its task ran is
    /// what keeps the rate when wake-ups come late: the bucket is charged
    /// as if the grant had gone on time.
    pub(crate) fn grant_time(&self, now: Nanos, cost: u64, joined: Nanos) -> Nanos {
        let Meter::Bucket(b) = &self.meter else {
            return now;
        };
        let paused = self.adaptive.as_ref().map_or(0, |a| a.paused_until);
        b.params
            .due(b.tat, cost)
            .max(paused)
            .max(joined)
            .max(now.saturating_sub(LATE))
            .min(now)
    }

    /// The grant [`Locked::serve`] made to `ticket`, if it made one.
    pub(crate) fn take_served(&mut self, ticket: u64) -> Option<Served> {
        let i = self.served.iter().position(|s| s.ticket == ticket)?;
        Some(self.served.swap_remove(i))
    }

    /// Removes a waiter; wakes the next head if it was the head.
    pub(crate) fn leave(&mut self, ticket: u64) {
        let was_head = self.waiters.first_key_value().map(|(t, _)| *t) == Some(ticket);
        if let Some(w) = self.waiters.remove(&ticket) {
            self.queued_cost -= w.cost;
        }
        if was_head {
            self.wake_head();
        }
    }

    /// A 429 from upstream: cut capacity (at most once per cooldown) and
    /// pause for the Retry-After (capped).
    pub(crate) fn throttle(
        &mut self,
        now: Nanos,
        retry_after: Option<Duration>,
        shared: &Shared,
        name: &str,
    ) -> Option<CapacityChange> {
        let cfg = shared.adaptive;
        let limit = self.limit;
        let a = self.adaptive_mut(shared);
        let cooldown = nanos(cfg.cooldown.unwrap_or(limit.window()));
        let may_reduce = a
            .reduced_at
            .is_none_or(|t| now >= t.saturating_add(cooldown));
        if let Some(pause) = retry_after {
            let pause = nanos(pause.min(cfg.max_pause));
            a.paused_until = a.paused_until.max(now.saturating_add(pause));
        }
        if !may_reduce {
            return None;
        }
        a.reduced_at = Some(now);
        a.cut = Cut::Seed;
        a.next_recovery = now.saturating_add(nanos(cfg.recovery_interval));
        let previous = limit.capacity();
        let capacity = adaptive::reduced(previous, cfg.reduce_factor);
        let configured = a.configured;
        if capacity == previous {
            return None;
        }
        self.limit = configured.scaled_to(capacity, configured.window());
        self.meter.reconfigure(&self.limit, now);
        let change = CapacityChange {
            resource: name.to_owned(),
            previous,
            capacity,
            configured: configured.capacity(),
            window: self.limit.window(),
            reason: ChangeReason::Throttled,
            at: shared.instant(now),
            announced_by: None,
        };
        shared.emit(change.clone());
        Some(change)
    }

    /// An operator's new limit: becomes the configured one; adaptation and
    /// pauses are forgotten. State is kept when the algorithm stays the same.
    pub(crate) fn configure(&mut self, limit: Limit, now: Nanos, shared: &Shared, name: &str) {
        let previous = self.limit.capacity();
        if limit.kind() == self.limit.kind() {
            self.meter.reconfigure(&limit, now);
            // The operator's number wins, debts included: a resource
            // configured anew starts from empty at worst, never owing.
            self.meter.forgive_debt(now);
        } else {
            let available = self.meter.available(now);
            self.meter = Meter::new(&limit, now);
            self.meter.set_margin(shared.base_margin());
            if available < limit.max_cost() as f64 {
                self.meter
                    .clamp_available(now, available.max(0.0).floor() as u64);
            }
        }
        self.limit = limit;
        self.adaptive = None;
        // What was learned of the upstream's jitter goes with the rest.
        self.meter.set_margin(shared.base_margin());
        self.pinned = true;
        shared.emit(CapacityChange {
            resource: name.to_owned(),
            previous,
            capacity: limit.capacity(),
            configured: limit.capacity(),
            window: limit.window(),
            reason: ChangeReason::Configured,
            at: shared.instant(now),
            announced_by: None,
        });
        // The head may fit now, or may need a different wait.
        self.wake_head();
    }
}

pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}
