//! The queue's state, changed only under its lock.
//!
//! Invariant after every change: either nothing is queued or every slot is
//! held. [`State::dispatch`] restores it whenever a slot frees or an entry
//! arrives.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::Waker;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::drr::EntryId;
use crate::error::{Error, Scope};
use crate::rate::DispatchRate;
use crate::scheduler::Scheduler;
use crate::{Priority, QueueConfig, Stats, Ticket};

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
    pub(crate) priority: Priority,
    pub(crate) deadline: Instant,
    pub(crate) enqueued: Instant,
    pub(crate) status: Status,
    pub(crate) waker: Option<Waker>,
}

/// The outcome of a ticket that was not refused.
#[derive(Debug)]
pub(crate) enum Enqueued<T> {
    /// Queued (perhaps already granted) as entry `id`; `flight` is the
    /// sender joiners wait on, when the ticket had a dedup key.
    Queued {
        id: EntryId,
        flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
    },
    /// An identical request is queued or running: wait for its result.
    Joined(FlightRx<T>),
}

#[derive(Debug, Default)]
struct Counters {
    dispatched: u64,
    rejected: u64,
    expired: u64,
    deduplicated: u64,
    cancelled: u64,
}

#[derive(Debug)]
pub(crate) struct State<T> {
    config: QueueConfig,
    scheduler: Scheduler,
    entries: HashMap<EntryId, Entry>,
    next_id: EntryId,
    flights: HashMap<FlightKey, FlightRx<T>>,
    in_flight: usize,
    rate: DispatchRate,
    counters: Counters,
    closed: bool,
}

impl<T> State<T> {
    pub(crate) fn new(config: QueueConfig, now: Instant) -> Self {
        State {
            scheduler: Scheduler::new(config.starvation_guard.map(NonZeroU32::get)),
            config,
            entries: HashMap::new(),
            next_id: 0,
            flights: HashMap::new(),
            in_flight: 0,
            rate: DispatchRate::new(now),
            counters: Counters::default(),
            closed: false,
        }
    }

    /// Queues `ticket`, joins the flight it duplicates, or refuses it.
    pub(crate) fn enqueue(
        &mut self,
        ticket: Ticket,
        now: Instant,
        wakers: &mut Vec<Waker>,
    ) -> Result<Enqueued<T>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        if ticket.deadline <= now {
            self.counters.expired += 1;
            return Err(Error::DeadlineExceeded);
        }
        let key = ticket.dedup_key.map(|k| (Arc::clone(&ticket.tenant), k));
        if let Some(rx) = key.as_ref().and_then(|k| self.flights.get(k)) {
            // Joining costs no depth: the work is already counted once.
            self.counters.deduplicated += 1;
            return Ok(Enqueued::Joined(rx.clone()));
        }
        // A free slot implies an empty queue (the invariant), so a full queue
        // means every slot is held and waiting is the only option.
        let scope = if self.scheduler.tenant_len(&ticket.tenant)
            >= self.config.max_depth_per_tenant.get()
        {
            Some(Scope::Tenant)
        } else if self.scheduler.len() >= self.config.max_depth_total.get() {
            Some(Scope::Total)
        } else {
            None
        };
        if let Some(scope) = scope {
            self.counters.rejected += 1;
            let retry_after = self.retry_after(scope, &ticket.tenant, now);
            return Err(Error::QueueFull { scope, retry_after });
        }

        let id = self.next_id;
        self.next_id += 1;
        let weight = self.config.weights.of(&ticket.tenant).get();
        self.scheduler
            .push(ticket.priority, &ticket.tenant, weight, id);
        self.entries.insert(
            id,
            Entry {
                tenant: ticket.tenant,
                priority: ticket.priority,
                deadline: ticket.deadline,
                enqueued: now,
                status: Status::Queued,
                waker: None,
            },
        );
        let flight = key.map(|key| {
            let (tx, rx) = watch::channel(None);
            self.flights.insert(key.clone(), rx);
            (key, tx)
        });
        self.dispatch(now, wakers);
        Ok(Enqueued::Queued { id, flight })
    }

    /// How long the backlog in front of a refused ticket takes to drain.
    /// For the tenant limit that is the tenant's own line, served at its
    /// weighted share of the dispatch rate.
    fn retry_after(&mut self, scope: Scope, tenant: &str, now: Instant) -> std::time::Duration {
        let backlog = match scope {
            Scope::Total => self.scheduler.len() as f64,
            Scope::Tenant => {
                let (own, total) = self.scheduler.share(tenant);
                self.scheduler.tenant_len(tenant) as f64 * f64::from(total) / f64::from(own.max(1))
            }
        };
        self.rate.drain_time(backlog, now)
    }

    /// Hands free slots to queued entries in scheduling order. An entry
    /// whose deadline has passed leaves instead, charging its tenant nothing.
    pub(crate) fn dispatch(&mut self, now: Instant, wakers: &mut Vec<Waker>) {
        while self.in_flight < self.config.concurrency.get() {
            let Some((priority, id)) = self.scheduler.peek() else {
                break;
            };
            let entry = self.entries.get_mut(&id).expect("queued entry exists");
            if entry.deadline <= now {
                self.scheduler.remove(priority, &entry.tenant, id);
                entry.status = Status::Expired;
                self.counters.expired += 1;
            } else {
                let popped = self.scheduler.pop();
                debug_assert_eq!(popped, Some(id));
                entry.status = Status::Granted { at: now };
                self.in_flight += 1;
                self.counters.dispatched += 1;
                self.rate.record(now);
            }
            wakers.extend(entry.waker.take());
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
    pub(crate) fn expire(&mut self, id: EntryId) {
        if let Some(entry) = self.entries.remove(&id) {
            debug_assert_eq!(entry.status, Status::Queued);
            self.scheduler.remove(entry.priority, &entry.tenant, id);
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
                self.scheduler.remove(entry.priority, &entry.tenant, id);
                self.counters.cancelled += 1;
            }
            Status::Granted { .. } => self.release(now, wakers),
            Status::Expired | Status::Closed => {}
        }
    }

    /// A slot comes back.
    pub(crate) fn release(&mut self, now: Instant, wakers: &mut Vec<Waker>) {
        self.in_flight -= 1;
        self.dispatch(now, wakers);
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
    pub(crate) fn close(&mut self, wakers: &mut Vec<Waker>) {
        self.closed = true;
        for id in self.scheduler.drain() {
            let entry = self.entries.get_mut(&id).expect("queued entry exists");
            entry.status = Status::Closed;
            wakers.extend(entry.waker.take());
        }
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.scheduler.len() > self.config.busy_threshold()
    }

    pub(crate) fn tenant_depth(&self, tenant: &str) -> usize {
        self.scheduler.tenant_len(tenant)
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            queued_by_priority: Priority::ALL.map(|p| self.scheduler.class_len(p)),
            queued_tenants: self.scheduler.tenant_count(),
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
