//! Fallback: a call whose model failed (throttled, erroring, out of time)
//! goes to the next model of `[fallbacks]`, each candidate with its own
//! limits and retries below.
//!
//! It sits above the limits because a fallback model has limits of its
//! own: each candidate goes through the limiter, the pool and the retries
//! again. A request too large for a model's limits is not sent to another
//! (the client must make it smaller).

use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use tower::{Layer, Service};

use super::failure::Failure;
use super::model_call::{Attempt, Call, provider};
use super::{BoxFuture, Next, Reply, Req, Served, call, observe};
use crate::error::ApiError;
use crate::state::AppState;

/// Wraps a stack in [`Fallback`].
#[derive(Debug, Clone)]
pub(crate) struct FallbackLayer {
    state: AppState,
}

impl FallbackLayer {
    pub(crate) fn new(state: &AppState) -> Self {
        FallbackLayer {
            state: state.clone(),
        }
    }
}

impl<S> Layer<S> for FallbackLayer {
    type Service = Fallback<S>;

    fn layer(&self, inner: S) -> Fallback<S> {
        Fallback {
            state: self.state.clone(),
            inner,
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Fallback<S> {
    state: AppState,
    inner: S,
}

impl<S> Service<Req<Call>> for Fallback<S>
where
    S: Next<Req<Attempt>, Served<Reply, Failure>>,
{
    type Response = Served<Reply>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<Reply>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req<Call>) -> Self::Future {
        let state = self.state.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let Req { call: c, mut notes } = req;
            let chain = candidates(&state, &c.model);
            let c = Arc::new(c);
            let mut last: Option<ApiError> = None;
            for (i, candidate) in chain.iter().enumerate() {
                // A fallback the caller's key may not use is no fallback.
                if provider(&state, candidate, c.endpoint).is_err()
                    || !c.ctx.allows_model(candidate)
                {
                    continue;
                }
                if i > 0 {
                    observe::fell_back(&mut notes, &chain[i - 1], candidate);
                }
                let attempt = Attempt {
                    call: c.clone(),
                    model: candidate.clone(),
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
                        return Ok(Served::ok(reply, notes));
                    }
                    Err(f) => {
                        notes.meta.attempts += f.attempts();
                        let fall_back = f.may_fall_back() && i + 1 < chain.len();
                        last = Some(f.into_error(candidate));
                        if !fall_back {
                            break;
                        }
                    }
                }
            }
            let e = last.unwrap_or_else(|| ApiError::bad_field("model", "no provider serves it"));
            Ok(Served::err(e, notes))
        })
    }
}

/// `model`, then its fallbacks in order.
fn candidates(state: &AppState, model: &str) -> Vec<String> {
    std::iter::once(model.to_owned())
        .chain(
            state
                .config
                .fallbacks
                .get(model)
                .into_iter()
                .flatten()
                .cloned(),
        )
        .collect()
}

#[cfg(test)]
#[path = "fallback/tests.rs"]
mod tests;
