//! The upstream call as the layers from retry down see it — what to limit
//! it on ([`Plan`]), what to send ([`Outgoing`]), one attempt on its way
//! down ([`Try`]) and up ([`Tried`]) — and the service at the bottom of
//! every stack, [`Wire`]: one HTTP request, timed out and classified.

mod urls;

use std::sync::Arc;
use std::time::Duration;

use axum::http::Uri;
use bytes::Bytes;
use sluice_admit::BulkheadPermit;
use sluice_limit::Permit;
use tokio::time::Instant;
use tower::ServiceBuilder;

use super::bulkhead::BulkheadLayer;
use super::limits::LimitsLayer;
use super::retry::RetryLayer;
use super::{Next, Req, Served};
use crate::client::{Route, TransportError, UpstreamResponse};
use crate::layers::context::Context;
use crate::layers::failure::Failure;
use crate::providers::Provider;

/// What to limit a call on.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// `(resource, cost)` taken before every attempt.
    pub needs: Vec<(String, u64)>,
    /// The resource upstream request quotas (and 429s) apply to.
    pub requests: String,
    /// The resource upstream token quotas apply to, if limited.
    pub tokens: Option<String>,
    /// The token resources the answer's usage settles: the model's, the
    /// key's and its tenant's.
    pub settle: Vec<String>,
    /// The bulkhead pool.
    pub pool: &'static str,
    /// Whether the call may be sent again (non-idempotent calls are not).
    pub retryable: bool,
    /// The provider or API, for metrics.
    pub label: String,
    /// The model or API asked for, as traces name it.
    pub name: String,
    /// The model provider's adapter, which reads its rate-limit headers;
    /// `None` for APIs (generic headers).
    pub provider: Option<&'static dyn Provider>,
    /// Whether a success is read and checked before it is passed on: a
    /// model's buffered answer must be a JSON object (`retry/answer.rs`).
    pub checks_answer: bool,
}

/// The upstream request, sent again as is on every attempt.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// The method.
    pub method: reqwest::Method,
    /// Where it goes, parsed once (a proxied path is never parsed from a
    /// string again: see `proxy::target`).
    pub url: reqwest::Url,
    /// The same, as the client sends it (see [`Outgoing::new`]).
    pub uri: Uri,
    /// Every header it carries (auth included).
    pub headers: reqwest::header::HeaderMap,
    /// The `Host` header for `uri`, made once with the URL (without it,
    /// the client makes it on every attempt).
    pub host: Option<reqwest::header::HeaderValue>,
    /// The body.
    pub body: Bytes,
    /// The client request's context, sent along on every attempt
    /// (`x-request-id`, and a `traceparent` with a new span id each).
    pub context: Option<Context>,
    /// Through a proxy or not, as decided for the upstream at start
    /// (`None`: decided when sent).
    pub route: Option<Route>,
}

impl Outgoing {
    /// A request to `url`, sent as is on every attempt.
    ///
    /// # Errors
    /// `url` is not one HTTP can send to (an `http::Uri` refuses it).
    pub(crate) fn new(
        method: reqwest::Method,
        url: reqwest::Url,
        headers: reqwest::header::HeaderMap,
        body: Bytes,
        context: Option<Context>,
    ) -> Result<Self, String> {
        let uri = urls::uri_of(&url)?;
        Ok(Outgoing {
            method,
            url,
            uri,
            headers,
            host: None,
            body,
            context,
            route: None,
        })
    }

    /// The same, sent by `route`.
    #[must_use]
    pub(crate) fn by(self, route: Option<Route>) -> Self {
        Outgoing { route, ..self }
    }

    /// A request to the URL `url`, parsed once per serving thread (see
    /// [`urls`]).
    ///
    /// # Errors
    /// `url` does not parse, or is not one HTTP can send to.
    pub(crate) fn to(
        method: reqwest::Method,
        url: &str,
        headers: reqwest::header::HeaderMap,
        body: Bytes,
        context: Option<Context>,
    ) -> Result<Self, String> {
        let urls::Parsed { url, uri, host } = urls::parse(url)?;
        Ok(Outgoing {
            method,
            url,
            uri,
            headers,
            host,
            body,
            context,
            route: None,
        })
    }
}

/// An upstream call: what the retry layer is asked to get an answer to.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// What to limit it on.
    pub plan: Plan,
    /// What to send.
    pub outgoing: Outgoing,
    /// When the client's request must be answered by.
    pub deadline: Instant,
}

impl Upstream {
    /// The last moment an attempt may be sent: `min_time_left_ms` before
    /// the deadline. A call sent later cannot be answered in time but
    /// spends the upstream's quota all the same.
    pub(crate) fn last_send(&self, cfg: &crate::config::RetryConfig) -> Instant {
        let floor = Duration::from_millis(cfg.min_time_left_ms);
        self.deadline.checked_sub(floor).unwrap_or(self.deadline)
    }
}

/// One attempt on its way down.
#[derive(Debug)]
pub(crate) struct Try {
    /// The call.
    pub upstream: Arc<Upstream>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The pool slot an earlier attempt took (kept across attempts).
    pub pool: Option<BulkheadPermit>,
    /// When this attempt began to wait for the limiter.
    pub limiter_start: Instant,
}

/// Why an attempt got no answer.
#[derive(Debug)]
pub(crate) enum Fault {
    /// Connecting or talking to the upstream failed.
    Transport(TransportError),
    /// The attempt's timeout (or the deadline) passed.
    Timeout,
}

/// One attempt for traces: the limiter wait before it, then the call.
#[derive(Debug, Clone)]
pub(crate) struct AttemptRecord {
    pub attempt: u32,
    /// The attempt's span: the parent id its `traceparent` sent upstream.
    pub span_id: [u8; 8],
    pub limiter_start: Instant,
    pub sent: Instant,
    pub ended: Instant,
    pub status: Option<u16>,
    pub outcome: &'static str,
}

/// One attempt on its way up from the wire.
#[derive(Debug)]
pub(crate) struct Tried {
    /// The answer, or why there is none.
    pub sent: Result<UpstreamResponse, Fault>,
    /// For metrics and traces.
    pub record: AttemptRecord,
}

/// An attempt past the bulkhead, with its pool slot.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub tried: Tried,
    pub pool: BulkheadPermit,
}

/// An attempt past the limits, with its grant and the Retry-After of the
/// upstream's rate-limit headers (the limiter has read the rest; all of
/// them are about 230 bytes to pass up).
#[derive(Debug)]
pub(crate) struct Granted {
    pub tried: Tried,
    pub pool: BulkheadPermit,
    pub grant: Permit,
    pub retry_after: Option<Duration>,
}

/// A call that got an answer worth passing on (2xx, or a 4xx that is the
/// client's to see), with what it holds until the answer is delivered.
#[derive(Debug)]
pub(crate) struct Answered {
    pub response: UpstreamResponse,
    pub grant: Permit,
    pub pool: BulkheadPermit,
    pub attempts: u32,
    /// Time spent waiting for the limiter and the pool.
    pub waited: Duration,
}

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
        let request = state.upstream.send(
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
