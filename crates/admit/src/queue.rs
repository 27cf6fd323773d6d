//! The admission queue: the public face over the scheduler and its state.

mod state;
mod waiter;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::{Admission, Error, LaneStats, Permit, QueueConfig, Stats, Ticket};
pub(crate) use state::FlightKey;
use state::{Enqueued, Granted, State, Wait};
use waiter::{Waiter, join};

/// Admission control in front of the gateway's upstream calls.
///
/// Entries wait in three strict [`Priority`](crate::Priority) classes (with a
/// starvation guard), shared fairly between tenants by weight inside each;
/// at most [`QueueConfig::concurrency`] run at once. Identical requests
/// (same tenant, same dedup key) run once. Cloning is cheap: clones share one
/// queue.
///
/// `T` is the result a leader publishes to the requests that joined it,
/// typically an `Arc` of a response; the default `()` suits callers that do
/// not deduplicate.
pub struct AdmissionQueue<T = ()> {
    shared: Arc<Shared<T>>,
}

pub(crate) struct Shared<T> {
    state: Mutex<State<T>>,
    /// Mirrors [`State::is_busy`] after every change.
    busy: watch::Sender<bool>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // No code under the lock panics short of a broken invariant, and
        // waking every caller with a panic would not help; carry on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the state at tokio's `now`, then publishes the busy flag
    /// and wakes whoever `f` granted or sent away — after unlocking, so a
    /// woken task never finds the lock held by its waker.
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&mut State<T>, Instant, &mut Vec<Waker>) -> R,
    ) -> R {
        let mut wakers = Vec::new();
        let result = {
            let mut state = self.lock();
            let result = f(&mut state, Instant::now(), &mut wakers);
            let busy = state.is_busy();
            self.busy
                .send_if_modified(|b| std::mem::replace(b, busy) != busy);
            result
        };
        wakers.into_iter().for_each(Waker::wake);
        result
    }
}

impl<T: Clone + Send + Sync + 'static> AdmissionQueue<T> {
    /// An empty queue.
    pub fn new(config: QueueConfig) -> Self {
        AdmissionQueue {
            shared: Arc::new(Shared {
                state: Mutex::new(State::new(config, Instant::now())),
                busy: watch::Sender::new(false),
            }),
        }
    }

    /// Waits for a slot, or for the result of an identical request.
    ///
    /// Returns [`Admission::Run`] with a slot for the caller to run the
    /// request in (it leads any duplicates that arrive meanwhile), or
    /// [`Admission::Joined`] with the leader's result. Dropping the future
    /// takes the entry out of the queue and gives back anything it held.
    ///
    /// # Errors
    ///
    /// [`Error::QueueFull`] if a depth limit refuses the ticket,
    /// [`Error::DeadlineExceeded`] if its deadline passes first,
    /// [`Error::LeaderCancelled`] if it joined a request that ended without
    /// a result, [`Error::Closed`] once the queue is closed.
    pub async fn admit(&self, ticket: Ticket) -> Result<Admission<T>, Error> {
        let deadline = ticket.deadline;
        let enqueued = self
            .shared
            .with(|state, now, wakers| state.enqueue(ticket, Wait::UntilDeadline, now, wakers))?;
        match enqueued {
            Enqueued::Granted(granted) => Ok(Admission::Run(self.permit(granted))),
            Enqueued::Joined(rx) => join(&self.shared, rx, deadline).await,
            Enqueued::Queued { id, flight } => {
                let waiter = Waiter::new(Arc::clone(&self.shared), id, flight);
                waiter.wait(deadline).await.map(Admission::Run)
            }
        }
    }

    /// A slot now, or a refusal now: [`admit`](Self::admit) for a caller
    /// that will not wait at all.
    ///
    /// Granted when the ticket's lane has a free slot (nothing is queued in
    /// it then, so no one is passed over), with the accounting of a grant
    /// by `admit`: the tenant's fair-queuing share is charged and
    /// [`Stats::dispatched`] counts it. The ticket's deadline plays no
    /// part, so time spent between building the ticket and this call never
    /// costs a free slot. A granted ticket with a dedup key leads it, as
    /// with `admit`.
    ///
    /// # Errors
    ///
    /// [`Error::WouldWait`] where `admit` would have queued the ticket
    /// (every slot of its lane is held) or joined an identical request
    /// still running (its result is not there yet); [`Error::QueueFull`]
    /// and [`Error::Closed`] as from `admit`. A refusal charges the tenant
    /// nothing and counts in [`Stats::rejected`].
    pub fn try_admit(&self, ticket: Ticket) -> Result<Permit<T>, Error> {
        let enqueued = self
            .shared
            .with(|state, now, wakers| state.enqueue(ticket, Wait::Never, now, wakers))?;
        match enqueued {
            Enqueued::Granted(granted) => Ok(self.permit(granted)),
            Enqueued::Queued { .. } | Enqueued::Joined(_) => {
                unreachable!("a ticket that never waits is granted or refused")
            }
        }
    }

    fn permit(&self, granted: Granted<T>) -> Permit<T> {
        let Granted {
            tenant,
            lane,
            priority,
            flight,
        } = granted;
        Permit::new(
            Arc::clone(&self.shared),
            flight,
            tenant,
            lane,
            priority,
            Duration::ZERO,
        )
    }

    /// Whether the backlog exceeds twice the concurrency: time to shed or
    /// defer work, and to report not-ready.
    pub fn is_busy(&self) -> bool {
        *self.shared.busy.borrow()
    }

    /// The busy flag as a channel that changes when it does.
    pub fn busy_signal(&self) -> watch::Receiver<bool> {
        self.shared.busy.subscribe()
    }

    /// Entries `tenant` has waiting.
    pub fn tenant_depth(&self, tenant: &str) -> usize {
        self.shared.lock().tenant_depth(tenant)
    }

    /// The tenants with entries waiting and how many each has, most
    /// first, at most `limit` of them (a dashboard's view; see
    /// [`Stats`] for why metrics do not label by tenant).
    pub fn tenant_depths(&self, limit: usize) -> Vec<(Arc<str>, usize)> {
        self.shared.lock().tenant_depths(limit)
    }

    /// The summed weights of the tenants with entries waiting in `lane`
    /// (each counted once; 0 when none wait): how much of a limit shared
    /// with other replicas this one should get for the lane (see
    /// `sluice_redis::RedisLimiter::weigh_by`).
    pub fn lane_weight(&self, lane: &str) -> u64 {
        self.shared.lock().lane_weight(lane)
    }

    /// Every lane with entries waiting or slots held, busiest first.
    pub fn lanes(&self) -> Vec<LaneStats> {
        self.shared.lock().lanes()
    }

    /// A snapshot for metrics.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats()
    }

    /// Refuses new tickets with [`Error::Closed`] and sends every queued
    /// entry away with it. Slots already held run to completion.
    pub fn close(&self) {
        self.shared
            .with(|state, now, wakers| state.close(now, wakers));
    }
}

impl<T: Clone + Send + Sync + 'static> Default for AdmissionQueue<T> {
    /// A queue with the seed's limits.
    fn default() -> Self {
        AdmissionQueue::new(QueueConfig::default())
    }
}

impl<T> Clone for AdmissionQueue<T> {
    fn clone(&self) -> Self {
        AdmissionQueue {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for AdmissionQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionQueue")
            .field("stats", &self.shared.lock().stats())
            .finish_non_exhaustive()
    }
}
