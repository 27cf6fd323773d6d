//! Admission: the queue that orders who goes to the limiter next —
//! priority classes, per-tenant fairness, depth limits and deadlines, one
//! lane per model or API ([`sluice_admit::AdmissionQueue`]).
//!
//! A request that joins an identical one in flight (see `dedup`) gets its
//! answer here without going further. One that runs goes down holding its
//! slot in its notes; the slot goes back once the request has cleared the
//! limiter and its pool (`bulkhead`), so a long upstream call holds no
//! dispatch slot.

use sluice_admit::{Admission, Ticket};
use tokio::time::Instant;

use super::context::Context;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call, observe};
use crate::state::AppState;

/// A request that waits in the admission queue.
pub(crate) trait Queued: Send + Sync + 'static {
    /// Its ticket: tenant, deadline, priority, lane, dedup key.
    fn ticket(&self) -> Ticket;

    /// Its context.
    fn ctx(&self) -> &Context;
}

/// Wraps a stack in [`Admit`].
pub(crate) type AdmissionLayer = StepLayer<Admit>;

/// See the module doc.
pub(crate) enum Admit {}

impl<T, S> Step<Req<T>, S> for Admit
where
    T: Queued,
    S: Next<Req<T>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: Req<T>) -> Served<Reply> {
        let Req { call: c, mut notes } = req;
        let started = Instant::now();
        let ticket = c.ticket();
        notes.pulse.lane.clone_from(&ticket.lane);
        let permit = match state.admission.queue.admit(ticket).await {
            Ok(Admission::Run(p)) => p,
            Ok(Admission::Joined(shared)) => {
                return Served::ok(Reply::Joined(shared), notes);
            }
            Err(e) => return Served::err(e, notes),
        };
        observe::queued(&mut notes, c.ctx().priority, started, permit.waited());
        notes.admission = Some(permit);
        call(inner, Req { call: c, notes }).await
    }
}

#[cfg(test)]
#[path = "admission/tests.rs"]
mod tests;
