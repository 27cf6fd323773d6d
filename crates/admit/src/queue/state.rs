//! The queue's state, changed only under its lock.
//!
//! Entries wait in *lanes*, one per resource a caller names on its ticket
//! (the model or API the request will wait for in the limiter), each with
//! its own priority classes, fair queue and `concurrency` slots. Lanes keep
//! a slow resource from holding every slot while others sit idle; depth
//! limits, deduplication and the tenants' service accounts (see
//! [`Service`]) stay global, so fairness holds across lanes.
//!
//! Invariant after every change, per lane: either nothing is queued or
//! every slot is held. [`State::dispatch`] restores it whenever a slot of
//! the lane frees or an entry arrives. A lane with nothing queued and no
//! slot held is removed, so lanes are bounded by the entries they hold.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::Waker;

use foldhash::fast::RandomState;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{Error, Scope};
use crate::fair::EntryId;
use crate::rate::DispatchRate;
use crate::scheduler::Scheduler;
use crate::service::{ARRIVAL_GRACE, Service};
use crate::{LaneStats, Priority, QueueConfig, Stats, Ticket};

/// A deduplication key: scoped to its tenant.
pub(crate) type FlightKey = (Arc<str>, String);

/// Where a leader's result is published; joiners hold receivers.
pub(crate) type FlightRx<T> = watch::Receiver<Option<T>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Queued,
    /// Given a slot (counted in `in_flight`) but not yet collected by its
    /// caller.
    Granted {
        at: Instant,
    },
    /// Left the queue on its deadline at dispatch time, before its own timer
    /// ran.
    Expired,
    Closed,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) tenant: Arc<str>,
    pub(crate) lane: Arc<str>,
    pub(crate) priority: Priority,
    /// Its weight in fair queuing: its ticket's, else its tenant's.
    pub(crate) weight: u32,
    pub(crate) deadline: Instant,
    pub(crate) enqueued: Instant,
    pub(crate) status: Status,
    pub(crate) waker: Option<Waker>,
}

/// A slot granted at once, before anything was queued in its lane.
#[derive(Debug)]
pub(crate) struct Granted<T> {
    pub(crate) tenant: Arc<str>,
    pub(crate) lane: Arc<str>,
    pub(crate) priority: Priority,
    pub(crate) flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
}

/// The outcome of a ticket that was not refused.
#[derive(Debug)]
pub(crate) enum Enqueued<T> {
    /// Granted at once: its lane had a free slot, so nothing was queued
    /// in it (the invariant) and the ticket would have been the first and
    /// only one dispatched. Never in the entries: its caller holds the
    /// slot from here on.
    Granted(Granted<T>),
    /// Queued (perhaps already granted) as entry `id`; `flight` is the
    /// sender joiners wait on, when the ticket had a dedup key.
    Queued {
        id: EntryId,
        flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
    },
    /// An identical request is queued or running: wait for its result.
    Joined(FlightRx<T>),
}

/// Whether a ticket may wait: for a slot, or for the result of the
/// identical request it duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until the ticket's deadline.
    UntilDeadline,
    /// Not at all: granted now or refused now, the deadline unread.
    Never,
}

#[derive(Debug, Default)]
struct Counters {
    dispatched: u64,
    rejected: u64,
    expired: u64,
    deduplicated: u64,
    cancelled: u64,
}

/// One resource's line: its own classes, fair queue and slots.
#[derive(Debug)]
struct Lane {
    scheduler: Scheduler,
    in_flight: usize,
}

#[derive(Debug)]
pub(crate) struct State<T> {
    config: QueueConfig,
    lanes: HashMap<Arc<str>, Lane, RandomState>,
    service: Service,
    entries: HashMap<EntryId, Entry, RandomState>,
    next_id: EntryId,
    flights: HashMap<FlightKey, FlightRx<T>>,
    /// Slots held, all lanes.
    in_flight: usize,
    rate: DispatchRate,
    counters: Counters,
    closed: bool,
}

impl<T> State<T> {
    pub(crate) fn new(config: QueueConfig, now: Instant) -> Self {
        State {
            config,
            lanes: HashMap::default(),
            service: Service::with_grace(ARRIVAL_GRACE),
            entries: HashMap::default(),
            next_id: 0,
            flights: HashMap::new(),
            in_flight: 0,
            rate: DispatchRate::new(now),
            counters: Counters::default(),
            closed: false,
        }
    }

    /// Queues `ticket`, joins the flight it duplicates, or refuses it;
    /// with [`Wait::Never`], grants it at once or refuses it where it would
    /// have queued or joined, and nothing else differs.
    pub(crate) fn enqueue(
        &mut self,
        ticket: Ticket,
        wait: Wait,
        now: Instant,
        wakers: &mut Vec<Waker>,
    ) -> Result<Enqueued<T>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        // A ticket that never waits has no deadline to miss: reading it
        // would let a caller descheduled between building the ticket and
        // reaching the lock lose a free slot.
        if wait == Wait::UntilDeadline && ticket.deadline <= now {
            self.counters.expired += 1;
            return Err(Error::DeadlineExceeded);
        }
        let key = ticket.dedup_key.map(|k| (Arc::clone(&ticket.tenant), k));
        if let Some(rx) = key.as_ref().and_then(|k| self.flights.get(k)) {
            if wait == Wait::Never {
                // Its result is not there yet, and running it again would
                // break "run once".
                return Err(self.would_wait(1, now));
            }
            // Joining costs no depth: the work is already counted once.
            self.counters.deduplicated += 1;
            return Ok(Enqueued::Joined(rx.clone()));
        }
        // A free slot implies an empty queue (the invariant), so a full queue
        // means every slot is held and waiting is the only option.
        let scope = if self.tenant_depth(&ticket.tenant) >= self.config.max_depth_per_tenant.get() {
            Some(Scope::Tenant)
        } else if self.queued() >= self.config.max_depth_total.get() {
            Some(Scope::Total)
        } else {
            None
        };
        if let Some(scope) = scope {
            self.counters.rejected += 1;
            let retry_after = self.retry_after(scope, &ticket.tenant, now);
            return Err(Error::QueueFull { scope, retry_after });
        }

        let lane_name: Arc<str> = ticket.lane.unwrap_or_else(|| Arc::from(""));
        let guard = self.config.starvation_guard.map(NonZeroU32::get);
        let concurrency = self.config.concurrency.get();
        let lane = self
            .lanes
            .entry(Arc::clone(&lane_name))
            .or_insert_with(|| Lane {
                scheduler: Scheduler::new(guard),
                in_flight: 0,
            });
        if wait == Wait::Never && lane.in_flight >= concurrency {
            // Not a new lane: one with no slot held has a free one.
            let backlog = lane.scheduler.len() + 1;
            return Err(self.would_wait(backlog, now));
        }
        let weight = ticket
            .weight
            .unwrap_or_else(|| self.config.weights.of(&ticket.tenant))
            .get();
        let flight = key.map(|key| {
            let (tx, rx) = watch::channel(None);
            self.flights.insert(key.clone(), rx);
            (key, tx)
        });
        if lane.in_flight < concurrency {
            // What `dispatch` would do with the lane's only entry, without
            // the entry: the same accounts, counters and rate, and no
            // second lock for its caller to collect the grant.
            lane.in_flight += 1;
            self.service.join(&ticket.tenant, now);
            self.service.served(&ticket.tenant, weight, now);
            self.in_flight += 1;
            self.counters.dispatched += 1;
            self.rate.record(now);
            return Ok(Enqueued::Granted(Granted {
                tenant: ticket.tenant,
                lane: lane_name,
                priority: ticket.priority,
                flight,
            }));
        }
        let id = self.next_id;
        self.next_id += 1;
        lane.scheduler.push(ticket.priority, &ticket.tenant, id);
        self.service.join(&ticket.tenant, now);
        self.entries.insert(
            id,
            Entry {
                tenant: ticket.tenant,
                lane: Arc::clone(&lane_name),
                priority: ticket.priority,
                weight,
                deadline: ticket.deadline,
                enqueued: now,
                status: Status::Queued,
                waker: None,
            },
        );
        self.dispatch(&lane_name, now, wakers);
        Ok(Enqueued::Queued { id, flight })
    }

    /// Refuses a ticket that does not wait where it would have, counted
    /// as a refusal; the hint is the time `backlog` dispatches take.
    fn would_wait(&mut self, backlog: usize, now: Instant) -> Error {
        self.counters.rejected += 1;
        Error::WouldWait {
            retry_after: self.rate.drain_time(backlog as f64, now),
        }
    }

    /// How long the backlog in front of a refused ticket takes to drain.
    /// For the tenant limit that is the tenant's own line, served at its
    /// weighted share of the dispatch rate.
    fn retry_after(&mut self, scope: Scope, tenant: &str, now: Instant) -> std::time::Duration {
        let backlog = match scope {
            Scope::Total => self.queued() as f64,
            Scope::Tenant => {
                let (own, total) = self.share(tenant);
                self.tenant_depth(tenant) as f64 * f64::from(total) / f64::from(own.max(1))
            }
        };
        self.rate.drain_time(backlog, now)
    }

    /// Hands the free slots of `lane` to its queued entries in scheduling
    /// order. An entry whose deadline has passed leaves instead, charging
    /// its tenant nothing. Removes the lane once it holds nothing.
    pub(crate) fn dispatch(&mut self, lane: &str, now: Instant, wakers: &mut Vec<Waker>) {
        let Some(l) = self.lanes.get_mut(lane) else {
            return;
        };
        while l.in_flight < self.config.concurrency.get() {
            let Some((priority, id)) = l.scheduler.peek(&self.service) else {
                break;
            };
            let entry = self.entries.get_mut(&id).expect("queued entry exists");
            if entry.deadline <= now {
                l.scheduler.remove(priority, &entry.tenant, id);
                self.service.leave(&entry.tenant, now);
                entry.status = Status::Expired;
                self.counters.expired += 1;
            } else {
                let popped = l.scheduler.pop(&self.service);
                debug_assert_eq!(popped, Some(id));
                self.service.served(&entry.tenant, entry.weight, now);
                entry.status = Status::Granted { at: now };
                l.in_flight += 1;
                self.in_flight += 1;
                self.counters.dispatched += 1;
                self.rate.record(now);
            }
            wakers.extend(entry.waker.take());
        }
        if l.in_flight == 0 && l.scheduler.len() == 0 {
            self.lanes.remove(lane);
        }
    }

    /// Takes queued entry `id` out of its lane's scheduler.
    fn unqueue(&mut self, entry: &Entry, id: EntryId, now: Instant) {
        if let Some(l) = self.lanes.get_mut(&entry.lane) {
            if l.scheduler.remove(entry.priority, &entry.tenant, id) {
                self.service.leave(&entry.tenant, now);
            }
            if l.in_flight == 0 && l.scheduler.len() == 0 {
                self.lanes.remove(&entry.lane);
            }
        }
    }

    pub(crate) fn entry_mut(&mut self, id: EntryId) -> Option<&mut Entry> {
        self.entries.get_mut(&id)
    }

    /// Removes entry `id` once its caller has collected what it was given.
    pub(crate) fn collect(&mut self, id: EntryId) -> Option<Entry> {
        self.entries.remove(&id)
    }

    /// Entry `id`'s deadline passed while it was queued.
    pub(crate) fn expire(&mut self, id: EntryId, now: Instant) {
        if let Some(entry) = self.entries.remove(&id) {
            debug_assert_eq!(entry.status, Status::Queued);
            self.unqueue(&entry, id, now);
            self.counters.expired += 1;
        }
    }

    /// Entry `id`'s caller went away: give back whatever it held.
    pub(crate) fn abandon(&mut self, id: EntryId, now: Instant, wakers: &mut Vec<Waker>) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        match entry.status {
            Status::Queued => {
                self.unqueue(&entry, id, now);
                self.counters.cancelled += 1;
            }
            Status::Granted { .. } => self.release(&entry.lane, now, wakers),
            Status::Expired | Status::Closed => {}
        }
    }

    /// A slot of `lane` comes back.
    pub(crate) fn release(&mut self, lane: &str, now: Instant, wakers: &mut Vec<Waker>) {
        self.in_flight -= 1;
        if let Some(l) = self.lanes.get_mut(lane) {
            l.in_flight -= 1;
        }
        self.dispatch(lane, now, wakers);
    }

    /// The leader of `key` is done (finished, or gone without a result).
    pub(crate) fn end_flight(&mut self, key: &FlightKey, tx: &watch::Sender<Option<T>>) {
        if self
            .flights
            .get(key)
            .is_some_and(|rx| rx.same_channel(&tx.subscribe()))
        {
            self.flights.remove(key);
        }
    }

    pub(crate) fn joined_expired(&mut self) {
        self.counters.expired += 1;
    }

    /// Refuses new tickets and sends every queued entry away.
    pub(crate) fn close(&mut self, now: Instant, wakers: &mut Vec<Waker>) {
        self.closed = true;
        let queued: Vec<EntryId> = self
            .lanes
            .values_mut()
            .flat_map(|l| l.scheduler.drain())
            .collect();
        self.lanes.retain(|_, l| l.in_flight > 0);
        for id in queued {
            let entry = self.entries.get_mut(&id).expect("queued entry exists");
            self.service.leave(&entry.tenant, now);
            entry.status = Status::Closed;
            wakers.extend(entry.waker.take());
        }
    }

    /// More than twice the concurrency waits, on average, in each lane
    /// with entries waiting.
    pub(crate) fn is_busy(&self) -> bool {
        let waiting_lanes = self
            .lanes
            .values()
            .filter(|l| l.scheduler.len() > 0)
            .count();
        self.queued() > self.config.busy_threshold().saturating_mul(waiting_lanes)
    }

    /// Entries waiting, all lanes.
    fn queued(&self) -> usize {
        self.lanes.values().map(|l| l.scheduler.len()).sum()
    }

    pub(crate) fn tenant_depth(&self, tenant: &str) -> usize {
        self.service.waiting(tenant)
    }

    /// Weight of `tenant` and the sum of the weights of every tenant with
    /// entries waiting, each counted once.
    fn share(&self, tenant: &str) -> (u32, u32) {
        let total = self
            .waiting_tenants()
            .iter()
            .map(|t| self.config.weights.of(t).get())
            .fold(0u32, u32::saturating_add);
        (self.config.weights.of(tenant).get(), total)
    }

    fn waiting_tenants(&self) -> Vec<&Arc<str>> {
        let mut tenants: Vec<&Arc<str>> = self
            .lanes
            .values()
            .flat_map(|l| l.scheduler.tenants())
            .collect();
        tenants.sort_unstable();
        tenants.dedup();
        tenants
    }

    /// The summed weights of the tenants with entries waiting in `lane`,
    /// each counted once.
    pub(crate) fn lane_weight(&self, lane: &str) -> u64 {
        let Some(l) = self.lanes.get(lane) else {
            return 0;
        };
        let mut tenants: Vec<&Arc<str>> = l.scheduler.tenants().collect();
        tenants.sort_unstable();
        tenants.dedup();
        tenants
            .iter()
            .map(|t| u64::from(self.config.weights.of(t).get()))
            .sum()
    }

    pub(crate) fn tenant_depths(&self, limit: usize) -> Vec<(Arc<str>, usize)> {
        let mut depths: Vec<(Arc<str>, usize)> = self
            .waiting_tenants()
            .into_iter()
            .map(|t| (Arc::clone(t), self.tenant_depth(t)))
            .collect();
        // Deepest first, then by name, so that the cut is stable.
        depths.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        depths.truncate(limit);
        depths
    }

    pub(crate) fn lanes(&self) -> Vec<LaneStats> {
        let mut lanes: Vec<LaneStats> = self
            .lanes
            .iter()
            .map(|(name, l)| LaneStats {
                lane: Arc::clone(name),
                queued_by_priority: Priority::ALL.map(|p| l.scheduler.class_len(p)),
                in_flight: l.in_flight,
            })
            .collect();
        lanes.sort_unstable_by(|a, b| {
            (b.queued() + b.in_flight)
                .cmp(&(a.queued() + a.in_flight))
                .then_with(|| a.lane.cmp(&b.lane))
        });
        lanes
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            queued_by_priority: Priority::ALL
                .map(|p| self.lanes.values().map(|l| l.scheduler.class_len(p)).sum()),
            queued_tenants: self.service.waiting_tenants(),
            in_flight: self.in_flight,
            flights: self.flights.len(),
            busy: self.is_busy(),
            dispatched: self.counters.dispatched,
            rejected: self.counters.rejected,
            expired: self.counters.expired,
            deduplicated: self.counters.deduplicated,
            cancelled: self.counters.cancelled,
        }
    }
}
