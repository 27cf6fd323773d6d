//! What admission hands out.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::Priority;
use crate::queue::{FlightKey, Shared};

/// The outcome of [`AdmissionQueue::admit`](crate::AdmissionQueue::admit).
#[derive(Debug)]
#[must_use = "a permit releases its slot when dropped"]
pub enum Admission<T> {
    /// Run the request while holding the permit; publish its result with
    /// [`Permit::complete`] if others may have joined.
    Run(Permit<T>),
    /// An identical request ran; this is a clone of its result.
    Joined(T),
}

/// A dispatch slot. Dropping it gives the slot to the next entry; a leader
/// dropped without [`Permit::complete`] leaves its joiners with
/// [`Error::LeaderCancelled`](crate::Error::LeaderCancelled).
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct Permit<T> {
    shared: Arc<Shared<T>>,
    flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
    tenant: Arc<str>,
    lane: Arc<str>,
    priority: Priority,
    waited: Duration,
    /// The slot went back early ([`Permit::dispatched`]).
    released: bool,
}

impl<T> Permit<T> {
    pub(crate) fn new(
        shared: Arc<Shared<T>>,
        flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
        tenant: Arc<str>,
        lane: Arc<str>,
        priority: Priority,
        waited: Duration,
    ) -> Self {
        Permit {
            shared,
            flight,
            tenant,
            lane,
            priority,
            waited,
            released: false,
        }
    }

    /// Gives the dispatch slot back now while keeping the deduplication
    /// flight open until [`Permit::complete`] or drop. A gateway calls this
    /// once the request has cleared the limiter: the queue orders who goes
    /// to the limiter next, and a long upstream call should not hold a
    /// dispatch slot (bulkheads bound those).
    pub fn dispatched(&mut self) {
        if !self.released {
            self.released = true;
            self.shared
                .with(|state, now, wakers| state.release(&self.lane, now, wakers));
        }
    }

    /// Publishes `result` to every request that joined this one, then
    /// releases the slot. Requests with the same key that arrive afterwards
    /// run again.
    pub fn complete(self, result: T) {
        if let Some((_, tx)) = &self.flight {
            // The value stays readable after the sender is dropped, so a
            // joiner that has not looked yet cannot miss it.
            tx.send_replace(Some(result));
        }
        // Dropping ends the flight and releases the slot.
    }

    /// The tenant the slot was granted to.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The class it waited in.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// How long it waited in the queue: a histogram's worth of latency.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Whether this request leads a deduplication key (others may join it).
    pub fn is_leader(&self) -> bool {
        self.flight.is_some()
    }
}

impl<T> Drop for Permit<T> {
    fn drop(&mut self) {
        let flight = self.flight.take();
        self.shared.with(|state, now, wakers| {
            if let Some((key, tx)) = &flight {
                state.end_flight(key, tx);
            }
            if !self.released {
                state.release(&self.lane, now, wakers);
            }
        });
        drop(flight);
    }
}

impl<T> fmt::Debug for Permit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("tenant", &self.tenant)
            .field("priority", &self.priority)
            .field("waited", &self.waited)
            .field("leader", &self.flight.as_ref().map(|((_, key), _)| key))
            .finish_non_exhaustive()
    }
}
