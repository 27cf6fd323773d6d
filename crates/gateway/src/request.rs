//! A request's context: who asks, how urgently, in which conversation,
//! under which id and trace, by when ([`Context`]); the request id every
//! answer carries ([`X_REQUEST_ID`], [`stamp`]) and the trace context sent
//! upstream ([`Context::propagate`]). Read from the headers by the context
//! layer (`layers/context/`); named here, at the bottom, so that the
//! rooms below the layers (ledger, audit, keys, OTel) can take it.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use sluice_admit::Priority;
use sluice_limit::headers::context::{TraceParent, push_hex, valid_request_id};
use tokio::time::Instant;

/// The request id a client may send and every answer carries.
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
/// A request's context.
#[derive(Debug, Clone)]
pub struct Context {
    /// The tenant (workspace).
    pub workspace: String,
    /// `x-sluice-priority`, default normal.
    pub priority: Priority,
    /// `x-sluice-thread`: the session, for the per-session limit and traces.
    pub thread: Option<String>,
    /// `x-request-id` or `Idempotency-Key`; made up when absent.
    pub request_id: String,
    /// Whether the id came from the client (and so deduplicates).
    pub client_id: bool,
    /// The request's span in Sluice: the client's trace (from its
    /// `traceparent`) or a new one, and a span id of its own.
    pub trace: TraceParent,
    /// The span that sent the request, when the client sent a valid
    /// `traceparent`.
    pub parent_span: Option<[u8; 8]>,
    /// The client's `tracestate`, passed on unchanged when valid.
    pub tracestate: Option<String>,
    /// When the request must be answered by.
    pub deadline: Instant,
    /// When it arrived.
    pub started: Instant,
    /// The key store's caller, for a key issued through it: its limits
    /// and allow-lists.
    pub caller: Option<std::sync::Arc<sluice_keys::Caller>>,
    /// `x-sluice-user`: the end user, for the usage ledger (a model
    /// call's body `user` when the header is absent).
    pub user: Option<String>,
    /// `x-sluice-feature`: the feature that made the call, for the
    /// usage ledger.
    pub feature: Option<String>,
}

impl Context {
    /// Its admission ticket: tenant, deadline, priority, and the fairness
    /// weight of its key (else its tenant) in the key store, when set
    /// there; else the tenant's `[[tenants]] weight` applies.
    pub fn ticket(&self) -> sluice_admit::Ticket {
        let ticket = sluice_admit::Ticket::new(self.workspace.clone(), self.deadline)
            .with_priority(self.priority);
        match self
            .caller
            .as_ref()
            .and_then(|c| c.weight())
            .and_then(std::num::NonZeroU32::new)
        {
            Some(w) => ticket.with_weight(w),
            None => ticket,
        }
    }

    /// Whether the caller's key and tenant allow `model` (everyone may
    /// call every model but callers with an allow-list).
    pub fn allows_model(&self, model: &str) -> bool {
        self.caller.as_ref().is_none_or(|c| c.allows_model(model))
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// `r` (one upstream attempt) with the request's context: its
    /// `x-request-id`, a `traceparent` of the request's trace with the
    /// attempt's own span id `span` (each attempt is a span of its own)
    /// and the client's `tracestate`.
    pub fn propagate(&self, headers: &mut HeaderMap, span: [u8; 8]) {
        let span = self.trace.child(span);
        // Both were valid header values when they were read or made.
        if let Ok(id) = HeaderValue::from_str(&self.request_id) {
            headers.insert(X_REQUEST_ID, id);
        }
        if let Ok(parent) = HeaderValue::try_from(span.to_header()) {
            headers.insert(TRACEPARENT, parent);
        }
        if let Some(state) = self.tracestate.as_deref()
            && let Ok(state) = HeaderValue::from_str(state)
        {
            headers.insert(TRACESTATE, state);
        }
    }
}

/// The client's `x-request-id`, when it is one to keep (see the module
/// doc).
pub(crate) fn client_request_id(headers: &HeaderMap) -> Option<&str> {
    request_id(headers.get(X_REQUEST_ID))
}

/// An `x-request-id` of `value`, when it is one to keep.
pub(crate) fn request_id(value: Option<&HeaderValue>) -> Option<&str> {
    value
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|id| valid_request_id(id))
}

/// The client's `traceparent`, when it sent a valid one (an invalid one
/// starts a new trace, as if none was sent).
pub(crate) fn client_traceparent(headers: &HeaderMap) -> Option<TraceParent> {
    traceparent(headers.get(TRACEPARENT))
}

/// A valid `traceparent` of `value`.
pub(crate) fn traceparent(value: Option<&HeaderValue>) -> Option<TraceParent> {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| TraceParent::parse(v).ok())
}

/// A random span id.
pub fn new_span_id() -> [u8; 8] {
    fastrand::u64(..).to_be_bytes()
}

/// A random request id.
pub fn new_id() -> String {
    // `req_` and 24 hex digits, as `format!("req_{:016x}{:08x}")` writes
    // them, without the formatter's machinery.
    let mut random = [0; 12];
    random[..8].copy_from_slice(&fastrand::u64(..).to_be_bytes());
    random[8..].copy_from_slice(&fastrand::u32(..).to_be_bytes());
    let mut id = String::with_capacity(28);
    id.push_str("req_");
    push_hex(&mut id, &random);
    id
}

/// Every answer, on its way out: one without an `x-request-id` (given
/// before any layer read the context: a 401, a 404, a route with no
/// context) gets `given`, the client's id when it is one to keep
/// ([`client_request_id`]), else a new one.
pub(crate) fn stamp(given: Option<String>, res: &mut Response) {
    if !res.headers().contains_key(X_REQUEST_ID) {
        let id = given.unwrap_or_else(new_id);
        if let Ok(v) = HeaderValue::from_str(&id) {
            res.headers_mut().insert(X_REQUEST_ID, v);
        }
    }
}
