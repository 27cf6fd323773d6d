//! Admission: the queue that orders who goes to the limiter next —
//! priority classes, per-tenant fairness, depth limits and deadlines, one
//! lane per model or API ([`sluice_admit::AdmissionQueue`]).
//!
//! A request that joins an identical one in flight (see `dedup`) gets its
//! answer here without going further. One that runs goes down holding its
//! slot in its notes; the slot goes back once the request has cleared the
//! limiter and its pool (`bulkhead`), so a long upstream call holds no
//! dispatch slot.

use std::task::{Context as TaskContext, Poll};

use sluice_admit::{Admission, Ticket};
use tokio::time::Instant;
use tower::{Layer, Service};

use super::context::Context;
use super::{BoxFuture, Next, Reply, Req, Served, call, observe};
use crate::state::AppState;

/// A request that waits in the admission queue.
pub(crate) trait Queued: Send + Sync + 'static {
    /// Its ticket: tenant, deadline, priority, lane, dedup key.
    fn ticket(&self) -> Ticket;

    /// Its context.
    fn ctx(&self) -> &Context;
}

/// Wraps a stack in [`Admit`].
#[derive(Debug, Clone)]
pub(crate) struct AdmissionLayer {
    state: AppState,
}

impl AdmissionLayer {
    pub(crate) fn new(state: &AppState) -> Self {
        AdmissionLayer {
            state: state.clone(),
        }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admit<S>;

    fn layer(&self, inner: S) -> Admit<S> {
        Admit {
            state: self.state.clone(),
            inner,
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Admit<S> {
    state: AppState,
    inner: S,
}

impl<T, S> Service<Req<T>> for Admit<S>
where
    T: Queued,
    S: Next<Req<T>, Served<Reply>>,
{
    type Response = Served<Reply>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<Reply>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req<T>) -> Self::Future {
        let state = self.state.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let Req { call: c, mut notes } = req;
            let started = Instant::now();
            let ticket = c.ticket();
            notes.pulse.lane.clone_from(&ticket.lane);
            let permit = match state.queue.admit(ticket).await {
                Ok(Admission::Run(p)) => p,
                Ok(Admission::Joined(shared)) => {
                    return Ok(Served::ok(Reply::Joined(shared), notes));
                }
                Err(e) => return Ok(Served::err(e, notes)),
            };
            observe::queued(&mut notes, c.ctx().priority, started, permit.waited());
            notes.admission = Some(permit);
            Ok(call(inner, Req { call: c, notes }).await)
        })
    }
}

#[cfg(test)]
#[path = "admission/tests.rs"]
mod tests;
