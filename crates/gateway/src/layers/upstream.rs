//! The upstream call as the layers from retry down see it — what to limit
//! it on ([`Plan`]), what to send ([`Outgoing`]), one attempt on its way
//! down ([`Try`]) and up ([`Tried`]). The service at the bottom of every
//! stack that sends it is `wire.rs`.

mod urls;

use std::sync::Arc;
use std::time::Duration;

use axum::http::Uri;
use bytes::Bytes;
use sluice_admit::BulkheadPermit;
use sluice_limit::Permit;
use tokio::time::Instant;

use crate::client::{Route, TransportError, UpstreamResponse};
use crate::providers::Provider;
use crate::request::Context;

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
    /// Whether a transient failure (429, 5xx, timeout, transport) goes up
    /// after one attempt, for the layer above to send the call elsewhere
    /// (a pool's other deployments) instead of here again.
    pub once: bool,
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

pub(crate) use crate::otel::AttemptRecord;

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
