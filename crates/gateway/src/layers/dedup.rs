//! Dedup: requests that carry the same client id (`x-request-id` or
//! `Idempotency-Key`) while the first runs share its answer instead of
//! calling the upstream again.
//!
//! The admission queue keeps the flights ([`sluice_admit`]'s single
//! flight): this layer chooses the key on the way down and publishes the
//! answer to the requests that joined on the way up. Only whole answers
//! are shared: a stream cannot be handed to a second client.

use std::sync::Arc;

use super::model_call::Call;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call};
use crate::state::AppState;

/// Wraps a stack in [`Dedup`].
pub(crate) type DedupLayer = StepLayer<Dedup>;

/// See the module doc.
pub(crate) enum Dedup {}

impl<S> Step<Req<Box<Call>>, S> for Dedup
where
    S: Next<Req<Box<Call>>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(_: AppState, inner: S, mut req: Req<Box<Call>>) -> Served<Reply> {
        let c = &req.call;
        if c.ctx.client_id && !c.stream {
            req.call.share = Some(c.ctx.request_id.clone());
        }
        let mut served = call(inner, req).await;
        // The slot's flight ends here: the joiners get this answer, and
        // requests with the same id that come later run again. Without
        // a flight (no client id, or a stream) nobody can have joined:
        // the answer is not copied for nobody.
        if let Some(permit) = served.notes.admission.take()
            && permit.is_leader()
        {
            match &served.result {
                Ok(Reply::Buffered(b)) => permit.complete(Arc::new(Ok(b.clone()))),
                Err(e) => permit.complete(Arc::new(Err(e.clone()))),
                Ok(Reply::Stream(_) | Reply::Joined(_) | Reply::Cached(_)) => drop(permit),
            }
        }
        served
    }
}

#[cfg(test)]
#[path = "dedup/tests.rs"]
mod tests;
