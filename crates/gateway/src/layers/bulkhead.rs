//! Bulkhead: a call takes a slot of its workload's pool (`model`, `api`)
//! before it is sent, and keeps it across its attempts until its answer
//! is delivered, so one workload cannot take every connection.
//!
//! Having cleared the limiter and the pool, the request gives its
//! admission slot back: the queue orders who goes to the limiter next,
//! and a long upstream call should not hold a dispatch slot.

use std::task::{Context as TaskContext, Poll};

use tower::{Layer, Service};

use super::failure::Failure;
use super::upstream::{Pooled, Tried, Try};
use super::{BoxFuture, Next, Req, Served, call, observe};
use crate::state::AppState;

/// Wraps a stack in [`Bulkhead`].
#[derive(Debug, Clone)]
pub(crate) struct BulkheadLayer {
    state: AppState,
}

impl BulkheadLayer {
    pub(crate) fn new(state: &AppState) -> Self {
        BulkheadLayer {
            state: state.clone(),
        }
    }
}

impl<S> Layer<S> for BulkheadLayer {
    type Service = Bulkhead<S>;

    fn layer(&self, inner: S) -> Bulkhead<S> {
        Bulkhead {
            state: self.state.clone(),
            inner,
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Bulkhead<S> {
    state: AppState,
    inner: S,
}

impl<S> Service<Req<Try>> for Bulkhead<S>
where
    S: Next<Req<Try>, Served<Tried, Failure>>,
{
    type Response = Served<Pooled, Failure>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<Pooled, Failure>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req<Try>) -> Self::Future {
        let state = self.state.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let Req {
                call: mut t,
                mut notes,
            } = req;
            let pool = match t.pool.take() {
                Some(held) => held,
                None => {
                    let plan = &t.upstream.plan;
                    let pool = state.bulkheads.get(plan.pool);
                    let acquired = tokio::select! {
                        biased;
                        () = state.grace_over() => {
                            return Ok(Served::err(crate::state::AppState::grace_ended(), notes));
                        }
                        r = pool.acquire(t.upstream.deadline) => r,
                    };
                    match acquired {
                        Ok(p) => p,
                        Err(e) => {
                            observe::refused(&plan.requests, "pool_full");
                            return Ok(Served::err(crate::error::ApiError::from(e), notes));
                        }
                    }
                }
            };
            if let Some(slot) = notes.admission.as_mut() {
                slot.dispatched();
            }
            let Served { result, notes } = call(inner, Req { call: t, notes }).await;
            Ok(Served {
                result: result.map(|tried| Pooled { tried, pool }),
                notes,
            })
        })
    }
}

#[cfg(test)]
#[path = "bulkhead/tests.rs"]
mod tests;
