//! One resource: its meter, its FIFO queue of waiters, its adaptive state.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

mod answer;
mod fast;
mod name;

pub(crate) use answer::Answer;
pub(crate) use fast::Fast;
pub(crate) use name::Name;

use crate::adaptive::{self, Adaptive, AdaptiveConfig, CapacityChange, ChangeReason, Cut};
use crate::clock::{Clock, FastClock};
use crate::meter::{Check, Meter, Nanos, Stamp, mul_div_ceil};
use crate::{Capacity, Limit};

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
    /// The limit it was created under (shared by the resources of a rule).
    birth: Arc<Limit>,
    /// `None` while the resource is a plain bucket under `birth` that only
    /// the fast path has needed since it was created or last swept: most
    /// keys of a large keyed limit never need more, and so cost no state.
    state: Mutex<Option<Box<State>>>,
}

impl Resource {
    /// A fresh resource holding back `margin` of refill (see
    /// [`AdaptiveConfig::jitter_margin`]).
    pub(crate) fn new(
        name: &str,
        birth: Arc<Limit>,
        now: Nanos,
        pinned: bool,
        margin: Nanos,
    ) -> Self {
        let limit = *birth;
        let mut meter = Meter::new(&limit, now);
        meter.set_margin(margin);
        let r = Resource {
            name: Name::new(name),
            fast: Fast::new(),
            cached: AtomicU32::new(0),
            birth,
            state: Mutex::new(Some(Box::new(State::new(limit, meter, pinned)))),
        };
        // Unlocking opens the fast path (and drops the state of a plain
        // bucket).
        r.lock().shed = true;
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
    /// For sweeps, a resource without state: whether it is idle (full),
    /// read from its word without building its state, and if so dropped
    /// from the map (`detached`, so that nothing takes from it again).
    /// `None` when it has state or its lock is busy: the sweep locks it.
    pub(crate) fn sweep_plain(&self, now: Nanos) -> Option<bool> {
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
        if tat > now as u128 * self.birth.capacity() as u128 {
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
        let free = st.waiters.is_empty()
            && st.in_flight == 0
            && st.adaptive.is_none()
            && !st.closed
            && !st.detached;
        if free
            && self.res.fast.open(b.tat, &b.params)
            && self.shed
            && !st.pinned
            && st.limit == *self.res.birth
        {
            // Nothing here that the fast path and `birth` do not hold
            // (what `taken` counted matters only to grants, and none is
            // held).
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
    /// grant it in passing (see [`State::serve`]).
    pub(crate) alone: bool,
}

/// A grant made to a queued waiter by someone else's pass over the queue
/// (see [`State::serve`]), held until its task is polled and takes it.
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
    /// [`State::serve`]); counted in `in_flight`.
    pub(crate) served: Vec<Served>,
    /// Total cost of the waiters, for wait estimates of newcomers.
    pub(crate) queued_cost: u64,
    /// Grants held.
    pub(crate) in_flight: u64,
    /// Everything taken so far, net of settles (wrapping): comparing it with
    /// the value a grant saw tells what was taken since that grant.
    pub(crate) taken: u64,
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
            in_flight: 0,
            taken: 0,
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

    /// Grants, in FIFO order, every waiter at the head of the queue that
    /// waits on this resource alone and whose tokens are due at `now`, in
    /// one pass: at high rates a token is due every few microseconds, and
    /// a wake-up per grant would cap the rate at the timer's. Each grant is
    /// left for its task (see [`State::take_served`]) and the task woken;
    /// the first waiter not granted is woken to look at the meter itself.
    pub(crate) fn serve(&mut self, now: Nanos) {
        self.serve_due(now, true);
    }

    /// [`State::serve`] in passing, from whatever else touches the
    /// resource while waiters queue (a newcomer, a grant let go): under
    /// load the head's timer fires late (a serving thread's runtime looks
    /// at its timers only between tasks, every so many of them), and the
    /// calls that keep a busy resource busy come often, so what is due
    /// goes then instead. The head is woken only if someone went, to arm
    /// its own timer as the new head; otherwise its timer stands.
    pub(crate) fn serve_in_passing(&mut self, now: Nanos) {
        if !self.waiters.is_empty() {
            self.serve_due(now, false);
        }
    }

    fn serve_due(&mut self, now: Nanos, wake_unready: bool) {
        let mut served = false;
        while let Some((&ticket, w)) = self.waiters.first_key_value() {
            let (cost, joined) = (w.cost, w.joined);
            let ready = w.alone
                && w.deadline.is_none_or(|d| now < d)
                && !self.closed
                && self.check(now, cost).is_ok();
            if !ready {
                if wake_unready || served {
                    self.wake_head();
                }
                return;
            }
            served = true;
            let at = self.grant_time(now, cost, joined);
            let Some(mut w) = self.waiters.remove(&ticket) else {
                return;
            };
            self.queued_cost -= cost;
            let stamp = self.take_waiter(at, cost, joined);
            self.in_flight += 1;
            self.served.push(Served {
                ticket,
                cost,
                stamp,
                taken: self.taken,
            });
            if let Some(waker) = w.waker.take() {
                waker.wake();
            }
        }
    }

    /// The grant [`State::serve`] made to `ticket`, if it made one.
    pub(crate) fn take_served(&mut self, ticket: u64) -> Option<Served> {
        let i = self.served.iter().position(|s| s.ticket == ticket)?;
        Some(self.served.swap_remove(i))
    }

    /// A waiter that was served but went away before taking its grant:
    /// what it was granted goes back, as if it had never been taken.
    pub(crate) fn unserve(&mut self, now: Nanos, ticket: u64) {
        if let Some(s) = self.take_served(ticket) {
            self.adjust(now, s.stamp, -i128::from(s.cost));
            self.in_flight = self.in_flight.saturating_sub(1);
            self.wake_head();
        }
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

    /// Takes `cost` from the meter and counts it in [`State::taken`].
    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.taken = self.taken.wrapping_add(cost);
        self.meter.take(now, cost)
    }

    /// [`State::take`] for a waiter on this resource alone that joined at
    /// `joined`: the jitter margin is held once per busy period, and a
    /// bucket that filled up while the waiter queued (the serving thread
    /// came late) did not start a new one. After a pause (a Retry-After)
    /// it did: the upstream saw no calls either.
    pub(crate) fn take_waiter(&mut self, at: Nanos, cost: u64, joined: Nanos) -> Stamp {
        self.taken = self.taken.wrapping_add(cost);
        let paused = self.adaptive.as_ref().map_or(0, |a| a.paused_until);
        self.meter.take_waiter(at, cost, joined, paused)
    }

    /// Changes what a grant took by `delta` (a settle): a refund gives it
    /// back to the meter, a debit takes more, even into debt.
    pub(crate) fn adjust(&mut self, now: Nanos, stamp: Stamp, delta: i128) {
        if delta < 0 {
            let amount = u64::try_from(-delta).unwrap_or(u64::MAX);
            self.taken = self.taken.wrapping_sub(amount);
            self.meter.refund(now, stamp, amount);
        } else {
            let amount = u64::try_from(delta).unwrap_or(u64::MAX);
            self.taken = self.taken.wrapping_add(amount);
            self.meter.debit(now, amount);
        }
    }

    /// Aligns with an upstream's own count: no more than `remaining` is
    /// available from now.
    ///
    /// With `since`, the time and [`State::taken`] of the grant whose answer
    /// carried the count, the count is read as an upstream's usually is:
    /// rounded down, and as of when that call arrived, not now. What the
    /// upstream holds now is then at most `remaining + 1`, plus what refilled
    /// since, minus what was taken here since; clamping to the bare count
    /// would throw away the refill of every call's round trip.
    pub(crate) fn sync(
        &mut self,
        now: Nanos,
        remaining: u64,
        reset: Option<Duration>,
        shared: &Shared,
        since: Option<(Nanos, u64)>,
    ) {
        let cfg = shared.adaptive;
        let bound = match since {
            None => remaining,
            Some((at, taken)) => {
                let refilled = mul_div_ceil(
                    self.limit.capacity(),
                    now.saturating_sub(at),
                    self.limit.window_nanos().max(1),
                );
                // Signed: settles since may have given back more than was taken.
                let taken_since = self.taken.wrapping_sub(taken) as i64;
                let bound =
                    i128::from(remaining) + 1 + i128::from(refilled) - i128::from(taken_since);
                u64::try_from(bound.max(0)).unwrap_or(u64::MAX)
            }
        };
        self.meter.clamp_available(now, bound);
        if remaining == 0
            && let Some(reset) = reset
        {
            let a = self.adaptive_mut(shared);
            let until = now.saturating_add(nanos(reset.min(cfg.max_pause)));
            a.paused_until = a.paused_until.max(until);
        }
    }

    pub(crate) fn capacity(&mut self, name: &str, now: Nanos, shared: &Shared) -> Capacity {
        let paused_for = self
            .adaptive
            .as_ref()
            .map(|a| a.paused_until.saturating_sub(now))
            .filter(|p| *p > 0)
            .map(Duration::from_nanos);
        let configured = *self.configured();
        let a = self.adaptive.as_deref();
        Capacity {
            jitter_margin: Duration::from_nanos(a.map_or(shared.base_margin(), |a| a.margin)),
            reason: self.reason(now),
            announced_per_second: a
                .filter(|a| a.estimate.samples >= crate::adaptive::estimate::SAMPLES)
                .map(|a| a.estimate.lo),
            announced_in_force: a.is_some_and(|a| a.cut == Cut::Announced),
            configured_window: configured.window(),
            resource: name.to_owned(),
            algorithm: self.limit.kind(),
            available: self.meter.available(now),
            total: self.limit.capacity(),
            burst: self.limit.max_cost(),
            window: self.limit.window(),
            in_flight: self.in_flight,
            waiting: self.waiters.len(),
            configured: configured.capacity(),
            paused_for,
        }
    }

    /// Nothing here that a fresh resource from the same rule would not have.
    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        !self.pinned
            && self.in_flight == 0
            && self.waiters.is_empty()
            && self.adaptive.is_none()
            && self.meter.is_idle(now)
    }
}

pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}
