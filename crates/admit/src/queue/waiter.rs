//! Waiting in the queue, and waiting for a leader's result.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::watch;
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};

use super::Shared;
use super::state::{FlightKey, FlightRx, Status};
use crate::fair::EntryId;
use crate::{Admission, Error, Permit};

/// A queued entry, seen from its caller. Dropping it (the caller gave up)
/// takes the entry out of the queue and returns whatever it held.
pub(super) struct Waiter<T> {
    shared: Arc<Shared<T>>,
    id: EntryId,
    /// Whether entry `id` is still in the state.
    armed: bool,
    flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
}

impl<T> Waiter<T> {
    pub(super) fn new(
        shared: Arc<Shared<T>>,
        id: EntryId,
        flight: Option<(FlightKey, watch::Sender<Option<T>>)>,
    ) -> Self {
        Waiter {
            shared,
            id,
            armed: true,
            flight,
        }
    }

    /// Waits for a slot until `deadline`, on one timer of its own: an
    /// expired entry leaves as soon as the timer fires, with no polling.
    pub(super) async fn wait(mut self, deadline: Instant) -> Result<Permit<T>, Error> {
        let mut sleep = pin!(sleep_until(deadline));
        poll_fn(|cx| self.poll_slot(cx, sleep.as_mut())).await
    }

    fn poll_slot(
        &mut self,
        cx: &mut Context<'_>,
        sleep: Pin<&mut Sleep>,
    ) -> Poll<Result<Permit<T>, Error>> {
        let id = self.id;
        let mut granted = None;
        let result = self.shared.with(|state, now, _| {
            let status = state
                .entry_mut(id)
                .expect("armed waiter has an entry")
                .status;
            match status {
                Status::Granted { at } => {
                    let entry = state.collect(id).expect("entry exists");
                    granted = Some((
                        entry.tenant,
                        entry.lane,
                        entry.priority,
                        at - entry.enqueued,
                    ));
                    Poll::Ready(Ok(()))
                }
                Status::Expired => {
                    state.collect(id);
                    Poll::Ready(Err(Error::DeadlineExceeded))
                }
                Status::Closed => {
                    state.collect(id);
                    Poll::Ready(Err(Error::Closed))
                }
                Status::Queued => {
                    if sleep.poll(cx).is_ready() {
                        state.expire(id, now);
                        return Poll::Ready(Err(Error::DeadlineExceeded));
                    }
                    let entry = state.entry_mut(id).expect("queued entry exists");
                    if !entry
                        .waker
                        .as_ref()
                        .is_some_and(|w| w.will_wake(cx.waker()))
                    {
                        entry.waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        });
        let result = std::task::ready!(result);
        self.armed = false;
        Poll::Ready(result.map(|()| {
            let (tenant, lane, priority, waited) = granted.expect("granted");
            Permit::new(
                Arc::clone(&self.shared),
                self.flight.take(),
                tenant,
                lane,
                priority,
                waited,
            )
        }))
    }
}

impl<T> Drop for Waiter<T> {
    fn drop(&mut self) {
        if !self.armed && self.flight.is_none() {
            return;
        }
        let (id, armed) = (self.id, self.armed);
        let flight = self.flight.take();
        self.shared.with(|state, now, wakers| {
            if armed {
                state.abandon(id, now, wakers);
            }
            if let Some((key, tx)) = &flight {
                state.end_flight(key, tx);
            }
        });
        // The sender goes last, outside the lock: joiners see the channel
        // close without a result and report the leader cancelled.
        drop(flight);
    }
}

/// Waits for the result of the leader `rx` belongs to, until `deadline`.
pub(super) async fn join<T: Clone>(
    shared: &Shared<T>,
    mut rx: FlightRx<T>,
    deadline: Instant,
) -> Result<Admission<T>, Error> {
    match timeout_at(deadline, rx.wait_for(Option::is_some)).await {
        Ok(Ok(result)) => {
            let result = result.as_ref().expect("waited for a result").clone();
            Ok(Admission::Joined(result))
        }
        Ok(Err(_closed)) => Err(Error::LeaderCancelled),
        Err(_elapsed) => {
            shared.with(|state, _, _| state.joined_expired());
            Err(Error::DeadlineExceeded)
        }
    }
}
