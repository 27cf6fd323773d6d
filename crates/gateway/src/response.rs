//! Responses shared between deduplicated requests, and the headers every
//! answer carries.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::error::ApiError;
use crate::request::X_REQUEST_ID;

/// What a request's leader publishes to requests that joined it.
pub type Shared = Arc<Result<Buffered, ApiError>>;

/// A complete (non-streamed) response.
#[derive(Debug, Clone)]
pub struct Buffered {
    /// The status.
    pub status: StatusCode,
    /// The headers worth passing on (content type, upstream rate limits).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Buffered {
    /// The response, once more (for an answer shared between requests).
    pub fn to_response(&self) -> Response {
        self.clone().into_response()
    }
}

impl IntoResponse for Buffered {
    /// The response, its headers and body moved in (an answer only its
    /// own request holds is not copied).
    fn into_response(self) -> Response {
        let mut res = Response::new(Body::from(self.body));
        *res.status_mut() = self.status;
        *res.headers_mut() = self.headers;
        res
    }
}

/// Turns a shared result into a response.
pub fn from_shared(shared: &Shared) -> Response {
    match &**shared {
        Ok(b) => b.to_response(),
        Err(e) => e.clone().into_response(),
    }
}

/// Headers that describe a proxied API's body: passed on to the client
/// (a gzip body without its `content-encoding`, or a GitHub page without
/// its `link`, would be useless) and kept with a cached answer.
pub const REPRESENTATION_HEADERS: &[&str] = &[
    "content-type",
    "content-encoding",
    "content-language",
    "etag",
    "last-modified",
    "link",
];

/// Upstream response headers passed through to the client of a model call.
pub fn pass_headers(upstream: &reqwest::header::HeaderMap) -> HeaderMap {
    pass(upstream, &[])
}

/// Upstream response headers passed through to the client of a proxied
/// API call: a model call's and the [`REPRESENTATION_HEADERS`].
pub fn pass_api_headers(upstream: &reqwest::header::HeaderMap) -> HeaderMap {
    pass(upstream, REPRESENTATION_HEADERS)
}

fn pass(upstream: &reqwest::header::HeaderMap, also: &[&str]) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in upstream {
        let n = name.as_str();
        let keep = n == "content-type"
            || n == "cache-control"
            // Redirects are never followed upstream; the caller decides.
            || n == "location"
            || n.starts_with("x-ratelimit-")
            || n.starts_with("anthropic-ratelimit-")
            || n.starts_with("ratelimit")
            || n == "openai-processing-ms"
            || n == "request-id"
            || also.contains(&n);
        if keep
            && let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_str().as_bytes()),
                HeaderValue::from_bytes(value.as_bytes()),
            )
        {
            out.append(name, value);
        }
    }
    out
}

/// The gateway's own response headers: request id, queue time, attempts.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// The request id (from `x-request-id` / `Idempotency-Key`, or made up).
    pub request_id: String,
    /// Time spent in the admission queue and the limiter.
    pub queued: Duration,
    /// Upstream attempts made.
    pub attempts: u32,
    /// The model that answered, when a fallback did.
    pub model: Option<String>,
    /// What the response cache did (`x-sluice-cache`: `miss` or
    /// `bypass`; a hit sets its own headers), when it was asked.
    pub cache: Option<&'static str>,
    /// The tightest budget of the caller, when it has budgets.
    pub budget: Option<BudgetNote>,
}

/// The budget with the least room left, as the call's reservation found
/// it: `x-sluice-budget-remaining: 42%; budget="tenant:acme:monthly";
/// reset=86400`, and from 80 % spent `x-sluice-budget-warning`.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetNote {
    /// The budget's id (`tenant:acme:monthly`, `key:{id}:daily`).
    pub budget: String,
    /// The share of its tightest cap spent, this call's worst case
    /// included.
    pub used: f64,
    /// Until the spend of this call stops counting.
    pub resets_in: std::time::Duration,
}

impl BudgetNote {
    fn apply(&self, h: &mut axum::http::HeaderMap) {
        let remaining = ((1.0 - self.used) * 100.0).floor().clamp(0.0, 100.0) as u8;
        let value = format!(
            "{remaining}%; budget={:?}; reset={}",
            self.budget,
            self.resets_in.as_secs()
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(BUDGET_REMAINING, v);
        }
        if self.used >= crate::budgets::WARN_AT {
            let spent = (self.used * 100.0).round() as u64;
            let warning = format!("budget {:?} is {spent}% spent", self.budget);
            if let Ok(v) = HeaderValue::from_str(&warning) {
                h.insert(BUDGET_WARNING, v);
            }
        }
    }
}

// Names made once: a `&str` name is parsed and checked on every insert.
const QUEUE_MS: HeaderName = HeaderName::from_static("x-sluice-queue-ms");
const ATTEMPTS: HeaderName = HeaderName::from_static("x-sluice-attempts");
const MODEL: HeaderName = HeaderName::from_static("x-sluice-model");
const CACHE: HeaderName = HeaderName::from_static("x-sluice-cache");
const BUDGET_REMAINING: HeaderName = HeaderName::from_static("x-sluice-budget-remaining");
const BUDGET_WARNING: HeaderName = HeaderName::from_static("x-sluice-budget-warning");

impl Meta {
    /// Adds the headers to `res`.
    pub fn apply(&self, res: &mut Response) {
        let h = res.headers_mut();
        // Empty before the context was read (a refused header): the
        // router's `stamp` gives that answer an id.
        if !self.request_id.is_empty()
            && let Ok(v) = HeaderValue::from_str(&self.request_id)
        {
            h.insert(X_REQUEST_ID, v);
        }
        h.insert(QUEUE_MS, HeaderValue::from(self.queued.as_millis() as u64));
        h.insert(ATTEMPTS, HeaderValue::from(self.attempts));
        if let Some(m) = &self.model
            && let Ok(v) = HeaderValue::from_str(m)
        {
            h.insert(MODEL, v);
        }
        if let Some(c) = self.cache
            && !h.contains_key(&CACHE)
        {
            h.insert(CACHE, HeaderValue::from_static(c));
        }
        if let Some(b) = &self.budget {
            b.apply(h);
        }
    }
}
