//! Fallback: a call whose model failed (throttled, erroring, out of time)
//! goes to the next model of `[fallbacks]`, each candidate with its own
//! limits and retries below.
//!
//! It sits above the limits because a fallback model has limits of its
//! own: each candidate goes through the limiter, the pool and the retries
//! again. A request too large for a model's limits is not sent to another
//! (the client must make it smaller).

use std::sync::Arc;

use super::failure::Failure;
use super::model_call::{Attempt, Call};
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call, observe};
use crate::error::ApiError;
use crate::state::AppState;

/// Wraps a stack in [`Fallback`].
pub(crate) type FallbackLayer = StepLayer<Fallback>;

/// See the module doc.
pub(crate) enum Fallback {}

impl<S> Step<Req<Box<Call>>, S> for Fallback
where
    S: Next<Req<Attempt>, Served<Reply, Failure>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: Req<Box<Call>>) -> Served<Reply> {
        let Req { call: c, mut notes } = req;
        let c: Arc<Call> = Arc::from(c);
        // The model, then its fallbacks in order (read in place: most
        // calls have none).
        let fallbacks = state.config.fallbacks.get(&c.model);
        let fallbacks = fallbacks.map_or(&[][..], Vec::as_slice);
        let chain = |i: usize| match i {
            0 => &c.model,
            _ => &fallbacks[i - 1],
        };
        let len = 1 + fallbacks.len();
        let mut last: Option<ApiError> = None;
        for i in 0..len {
            let candidate = chain(i);
            // A fallback the caller's key may not use is no fallback.
            if c.provider_for(&state, candidate).is_err() || !c.ctx.allows_model(candidate) {
                continue;
            }
            if i > 0 {
                observe::fell_back(&mut notes, chain(i - 1), candidate);
            }
            let attempt = Attempt {
                call: c.clone(),
                model: candidate.clone(),
                deployment: None,
            };
            let served = call(
                inner.clone(),
                Req {
                    call: attempt,
                    notes,
                },
            )
            .await;
            notes = served.notes;
            match served.result {
                Ok(reply) => {
                    if i > 0 {
                        notes.meta.model = Some(candidate.clone());
                    }
                    return Served::ok(reply, notes);
                }
                Err(f) => {
                    notes.meta.attempts += f.attempts();
                    let fall_back = f.may_fall_back() && i + 1 < len;
                    last = Some(f.into_error(candidate));
                    if !fall_back {
                        break;
                    }
                }
            }
        }
        let e = last.unwrap_or_else(|| ApiError::bad_field("model", "no provider serves it"));
        Served::err(e, notes)
    }
}

#[cfg(test)]
#[path = "fallback/tests.rs"]
mod tests;
