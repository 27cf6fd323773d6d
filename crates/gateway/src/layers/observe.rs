//! Observe: the request's metrics and trace, fired from this one place
//! when its answer is known (a streamed answer's trace when its stream
//! ends), and the gateway's own response headers.
//!
//! The outermost layer, so that it sees every answer, refusals included:
//! `sluice_requests_total` counts a request refused for its headers or
//! body; the trace exists only once a layer below started it.

use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use sluice_admit::Priority;
use tokio::time::Instant;
use tower::{Layer, Service};

use super::{BoxFuture, Next, Notes, Reply, Served, call};
use crate::error::ApiError;
use crate::metrics;
use crate::state::AppState;
use crate::trace::{Trace, TraceWriter};

/// A request that knows its route (the metrics label).
pub(crate) trait Routed {
    /// The route, as metrics name it.
    fn route(&self) -> &'static str;
}

/// Wraps a stack in [`Observe`].
#[derive(Debug, Clone)]
pub(crate) struct ObserveLayer {
    state: AppState,
}

impl ObserveLayer {
    pub(crate) fn new(state: &AppState) -> Self {
        ObserveLayer {
            state: state.clone(),
        }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            state: self.state.clone(),
            inner,
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Observe<S> {
    state: AppState,
    inner: S,
}

impl<R, S> Service<R> for Observe<S>
where
    R: Routed + Send + 'static,
    S: Next<R, Served<Reply>>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Response>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        let state = self.state.clone();
        let inner = self.inner.clone();
        let route = req.route();
        Box::pin(async move {
            let started = Instant::now();
            let Served { result, mut notes } = call(inner, req).await;
            let (mut res, error) = match result {
                Ok(reply) => (reply.into_response(), None),
                Err(e) => {
                    if let ApiError::QueueFull { scope, .. } = &e {
                        metrics::queue_rejected(scope);
                    }
                    let message = e.to_string();
                    (e.into_response(), Some(message))
                }
            };
            notes.meta.apply(&mut res);
            let status = res.status().as_u16();
            state.metrics.request(
                route,
                notes.label.as_deref().unwrap_or("-"),
                status,
                notes.tenant.as_deref(),
            );
            metrics::request_duration(route, started.elapsed().as_secs_f64());
            if let Some(mut trace) = notes.trace.take() {
                trace.status = status;
                trace.attempts = notes.meta.attempts;
                trace.error = error;
                submit(state.traces.as_ref(), trace);
            }
            Ok(res)
        })
    }
}

/// A request admitted after waiting `waited` in its class: the queue's
/// histogram and the trace's `queue` span (from `started`, now).
pub(crate) fn queued(notes: &mut Notes, priority: Priority, started: Instant, waited: Duration) {
    metrics::queue_wait(priority.as_str(), waited.as_secs_f64());
    if let Some(t) = notes.trace.as_mut() {
        let mut m = serde_json::Map::new();
        m.insert("priority".into(), priority.as_str().into());
        t.record_span("queue", started, Instant::now(), m);
    }
}

/// A call moves from model `from` to its fallback `to`.
pub(crate) fn fell_back(notes: &mut Notes, from: &str, to: &str) {
    metrics::fallback(from, to);
    notes.label = Some(to.to_owned());
    tracing::info!(from = %from, to = %to, "falling back");
}

/// Hands a finished trace to the writer, when traces are on.
pub(crate) fn submit(writer: Option<&TraceWriter>, trace: Trace) {
    if let Some(w) = writer {
        w.submit(trace.finish());
    }
}
