//! Dedup: requests that carry the same client id (`x-request-id` or
//! `Idempotency-Key`) while the first runs share its answer instead of
//! calling the upstream again.
//!
//! The admission queue keeps the flights ([`sluice_admit`]'s single
//! flight): this layer chooses the key on the way down and publishes the
//! answer to the requests that joined on the way up. Only whole answers
//! are shared: a stream cannot be handed to a second client.
//!
//! A request joins another with its id only when their bodies are the
//! same (byte for byte): one with the same id and another body while the
//! first is in flight is a 409 naming `x-request-id`, never handed an
//! answer to a question it did not ask.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::model_call::Call;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call};
use crate::state::{Admission, AppState};

/// Wraps a stack in [`Dedup`].
pub(crate) type DedupLayer = StepLayer<Dedup>;

/// See the module doc.
pub(crate) enum Dedup {}

impl<S> Step<Req<Box<Call>>, S> for Dedup
where
    S: Next<Req<Box<Call>>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, mut req: Req<Box<Call>>) -> Served<Reply> {
        let c = &req.call;
        let mut _in_flight = None;
        if c.ctx.client_id && !c.stream {
            let fingerprint = c.fingerprint.unwrap_or(0);
            match enter(&state, &c.ctx.workspace, &c.ctx.request_id, fingerprint) {
                Ok(guard) => _in_flight = Some(guard),
                Err(e) => return Served::err(e, req.notes),
            }
            req.call.share = Some(format!("{}#{fingerprint:016x}", c.ctx.request_id));
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

/// Holds an id in the dedup table for one request; dropping it lets the id go.
#[derive(Debug)]
pub(crate) struct InFlight {
    admission: Arc<Admission>,
    key: (String, String),
}

/// Enters `tenant`'s request `id` with a body hashing to `fingerprint`.
///
/// # Errors
/// 409 naming `x-request-id` when the id is in flight with another body.
fn enter(
    state: &AppState,
    tenant: &str,
    id: &str,
    fingerprint: u64,
) -> Result<InFlight, crate::error::ApiError> {
    let key = (tenant.to_owned(), id.to_owned());
    {
        let mut table = state.admission.dedup.lock();
        match table.entry(key.clone()) {
            Entry::Occupied(mut e) => {
                if e.get().0 != fingerprint {
                    return Err(crate::error::ApiError::Conflict(format!(
                        "header `x-request-id`: {id:?} is in flight with another body; \
                         use a new id for a different request"
                    )));
                }
                e.get_mut().1 += 1;
            }
            Entry::Vacant(e) => {
                e.insert((fingerprint, 1));
            }
        }
    }
    Ok(InFlight {
        admission: state.admission.clone(),
        key,
    })
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut table = self.admission.dedup.lock();
        if let Entry::Occupied(mut e) = table.entry(std::mem::take(&mut self.key)) {
            e.get_mut().1 -= 1;
            if e.get().1 == 0 {
                e.remove();
            }
        }
    }
}

#[cfg(test)]
#[path = "dedup/tests.rs"]
mod tests;
