//! The bottom of every stack: the attempts of one upstream call
//! ([`attempts`]), each retried above the limits and the pool, and
//! [`Wire`], which sends one HTTP request, timed out and classified.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower::ServiceBuilder;

use super::bulkhead::BulkheadLayer;
use super::failure::Failure;
use super::limits::LimitsLayer;
use super::retry::RetryLayer;
use super::upstream::{Answered, AttemptRecord, Fault, Tried, Try, Upstream};
use super::{Next, Req, Served};
use crate::client::{TransportError, UpstreamResponse};

/// The bottom of every stack, one upstream call: retried above the
/// limits and the pool, so that each attempt clears both again before it
/// goes on the wire (see [`super::retry`]).
pub(crate) fn attempts() -> impl Next<Req<Arc<Upstream>>, Served<Answered, Failure>> {
    ServiceBuilder::new()
        .layer(RetryLayer::new())
        .layer(LimitsLayer::new())
        .layer(BulkheadLayer::new())
        .service(Wire)
}

/// The bottom of the stack: sends one attempt (with the client of the
/// state the request brings).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wire;

impl Next<Req<Try>, Served<Tried, Failure>> for Wire {
    async fn call(self, req: Req<Try>) -> Served<Tried, Failure> {
        let Req { call: t, notes } = req;
        let state = &notes.state;
        let up = &t.upstream;
        if Instant::now() > up.last_send(&state.config.retry) {
            // Granted too late to be answered in time: not sent, and
            // the limits above give back what it took.
            super::observe::refused(&up.plan.requests, "too_late");
            let f = Failure::Timeout {
                attempts: t.attempt - 1,
            };
            return Served::err(f, notes);
        }
        let out = &up.outgoing;
        let timeout = Duration::from_millis(state.config.retry.attempt_timeout_ms)
            .min(up.deadline.saturating_duration_since(Instant::now()));
        let sent = Instant::now();
        let mut headers = out.headers.clone();
        let span_id = crate::request::new_span_id();
        if let Some(ctx) = &out.context {
            ctx.propagate(&mut headers, span_id);
        }
        let request = state.upstreams.upstream.send(
            out.route,
            out.method.clone(),
            &out.uri,
            headers,
            out.host.as_ref(),
            out.body.clone(),
        );
        let result = tokio::time::timeout(timeout, request).await;
        let (status, outcome) = classify(&result);
        let record = AttemptRecord {
            attempt: t.attempt,
            span_id,
            limiter_start: t.limiter_start,
            sent,
            ended: Instant::now(),
            status,
            outcome,
        };
        let sent = match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(Fault::Transport(e)),
            Err(_) => Err(Fault::Timeout),
        };
        Served::ok(Tried { sent, record }, notes)
    }
}

/// The status and the outcome's name (a metrics label).
fn classify<E>(
    result: &Result<Result<UpstreamResponse, TransportError>, E>,
) -> (Option<u16>, &'static str) {
    match result {
        Ok(Ok(r)) => {
            let s = r.status().as_u16();
            let outcome = match s {
                429 => "throttled",
                408 | 500..=599 => "error",
                _ => "answered",
            };
            (Some(s), outcome)
        }
        Ok(Err(e)) if e.is_connect() => (None, "connect_error"),
        Ok(Err(_)) => (None, "transport_error"),
        Err(_) => (None, "timeout"),
    }
}
