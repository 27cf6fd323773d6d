//! A request's OpenTelemetry spans, built beside its JSONL trace when
//! `[otel]` is configured and the request is sampled, and handed to the
//! exporter when the trace is finished. With `[otel]` off, or a request
//! not sampled, nothing here is built: the trace carries `None`.
//!
//! The tree (docs/observability.md):
//!
//! ```text
//! POST /v1/chat/completions          SERVER  the client's span as parent, if it sent one
//! ├── sluice.cache                   INTERNAL  hit, miss or bypass (models, cached API GETs)
//! ├── sluice.admission               INTERNAL  the queue wait
//! ├── sluice.ledger                  PRODUCER  the usage record handed to the ledger's writer
//! └── chat gpt-4o-mini               CLIENT    one per candidate model (fallbacks), gen_ai.*
//!     ├── sluice.limiter             INTERNAL  per attempt
//!     ├── POST                       CLIENT    per attempt: the span id sent upstream in traceparent
//!     └── sluice.stream              INTERNAL  a streamed answer, to its end
//! ```
//!
//! An MCP tool call's spans are its own ([`tool`]).

mod genai;
mod tool;

use std::borrow::Cow;

use sluice_otel::{Clock, Exporter, Kind, Span, SpanId, Status, TraceId};
use tokio::time::Instant;

use crate::request::Context;
use crate::trace::Trace;
use sluice_usage::{AnswerHead, Usage};

pub(crate) use genai::{ModelCall, head_of};
pub(crate) use tool::{ToolSpan, tool_call};

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

/// The spans of one sampled request.
#[derive(Debug, Clone)]
pub(crate) struct Spans {
    exporter: Exporter,
    clock: Clock,
    trace_id: TraceId,
    /// The request's own span (its id is in the trace's `traceparent`).
    root: SpanId,
    /// The client's span, when it sent a `traceparent`.
    parent: Option<SpanId>,
    method: Cow<'static, str>,
    started: Instant,
    spans: Vec<Span>,
    /// The model call under way (its index in `spans`).
    model: Option<usize>,
}

impl Spans {
    /// The spans of `ctx`'s request, when `exporter` is on and the
    /// request is sampled.
    pub(crate) fn start(
        exporter: Option<&Exporter>,
        ctx: &Context,
        method: impl Into<Cow<'static, str>>,
    ) -> Option<Box<Spans>> {
        let exporter = exporter?;
        if ctx.trace.flags & 1 == 0 {
            return None;
        }
        Some(Box::new(Spans {
            exporter: exporter.clone(),
            clock: Clock::at(ctx.started),
            trace_id: ctx.trace.trace_id,
            root: ctx.trace.span_id,
            parent: ctx.parent_span,
            method: method.into(),
            started: ctx.started,
            spans: Vec::with_capacity(8),
            model: None,
        }))
    }

    /// A span under `parent` from `start` to `end`, with room for
    /// `attributes` (one allocation, not a growing vector's three).
    fn push(
        &mut self,
        parent: SpanId,
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        (start, end): (Instant, Instant),
        attributes: usize,
    ) -> &mut Span {
        let mut span = Span::new(
            self.trace_id,
            Some(parent),
            name,
            kind,
            self.clock.unix_nanos(start),
            self.clock.unix_nanos(end),
        );
        span.attributes.reserve_exact(attributes);
        self.spans.push(span);
        self.spans.last_mut().expect("just pushed")
    }

    /// The span new steps hang from: the model call under way, else the
    /// request.
    fn current(&self) -> SpanId {
        self.model
            .and_then(|i| self.spans.get(i))
            .map_or(self.root, |s| s.span_id)
    }

    /// The cache looked the request up from `start` until now.
    pub(crate) fn cache(&mut self, start: Instant, result: &'static str) {
        let root = self.root;
        self.push(
            root,
            "sluice.cache",
            Kind::Internal,
            (start, Instant::now()),
            1,
        )
        .set("sluice.cache.result", result);
    }

    /// The call's ledger record, of `cost_nanos` (`estimated` or read),
    /// was handed to the writer from `start` to `end`, `queued` records
    /// waiting for it then.
    pub(crate) fn ledger(
        &mut self,
        (start, end): (Instant, Instant),
        cost_nanos: u64,
        estimated: bool,
        queued: usize,
    ) {
        let root = self.root;
        // Cost in dollars: what dashboards sum; nanodollars stay exact
        // in the ledger itself.
        #[allow(clippy::cast_precision_loss)]
        let cost = cost_nanos as f64 / 1e9;
        self.push(root, "sluice.ledger", Kind::Producer, (start, end), 3)
            .set("sluice.cost_usd", cost)
            .set("sluice.usage.estimated", estimated)
            .set("sluice.ledger.queued", queued as u64);
    }

    /// The request waited in its admission queue from `start` to `end`.
    pub(crate) fn queued(&mut self, start: Instant, end: Instant, priority: &'static str) {
        let root = self.root;
        self.push(root, "sluice.admission", Kind::Internal, (start, end), 1)
            .set("sluice.priority", priority);
    }

    /// A candidate model's call begins (ended by [`Spans::model_ended`]).
    pub(crate) fn model_began(&mut self, call: &ModelCall<'_>) {
        self.model_ended(None, None, Some(("superseded", "another model call began")));
        let now = Instant::now();
        let root = self.root;
        let span = self.push(root, call.span_name(), Kind::Client, (now, now), 16);
        call.describe(span);
        self.model = Some(self.spans.len() - 1);
    }

    /// The model call under way ended now: with its usage and what the
    /// answer said of itself ([`head_of`] a whole answer, a stream's
    /// reader's), or failed with `error` (its `error.type` and message).
    pub(crate) fn model_ended(
        &mut self,
        usage: Option<Usage>,
        head: Option<AnswerHead>,
        error: Option<(&'static str, &str)>,
    ) {
        let Some(span) = self.model.take().and_then(|i| self.spans.get_mut(i)) else {
            return;
        };
        span.end_unix_nanos = self.clock.unix_nanos(Instant::now());
        genai::answered(span, usage, head);
        if let Some((kind, message)) = error {
            span.set("error.type", kind);
            span.status = Status::Error(message.to_owned());
        }
    }

    /// One attempt of a call limited on `resource`, sending `method` to
    /// `url`: the limiter wait, then the HTTP call, whose span id is the
    /// one its `traceparent` carried.
    pub(crate) fn attempt(
        &mut self,
        resource: &str,
        (method, url): (&reqwest::Method, &reqwest::Url),
        a: &AttemptRecord,
    ) {
        let parent = self.current();
        self.push(
            parent,
            "sluice.limiter",
            Kind::Internal,
            (a.limiter_start, a.sent),
            2,
        )
        .set("sluice.attempt", a.attempt)
        .set("sluice.resource", resource.to_owned());
        let method = method_name(method);
        let span = self.push(parent, method.clone(), Kind::Client, (a.sent, a.ended), 10);
        span.span_id = a.span_id;
        span.set("http.request.method", method)
            .set("url.full", without_query(url))
            .set("sluice.attempt", a.attempt)
            .set("sluice.outcome", a.outcome);
        if let Some(host) = url.host_str() {
            span.set("server.address", host.to_owned());
        }
        if let Some(port) = url.port_or_known_default() {
            span.set("server.port", port);
        }
        if a.attempt > 1 {
            span.set("http.request.resend_count", a.attempt - 1);
        }
        match a.status {
            Some(s) => {
                span.set("http.response.status_code", s);
                if s >= 400 {
                    span.set("error.type", s.to_string());
                    span.status = Status::Error(format!("upstream answered {s}"));
                }
            }
            None => {
                span.set("error.type", a.outcome);
                span.status = Status::Error(a.outcome.to_owned());
            }
        }
    }

    /// A streamed answer ran from `start` until now and ended in
    /// `outcome`, having said `head` of itself; the model call ends with
    /// it.
    pub(crate) fn stream(
        &mut self,
        start: Instant,
        outcome: &'static str,
        (usage, head): (Option<Usage>, AnswerHead),
        tool_calls: u32,
    ) {
        let parent = self.current();
        self.push(
            parent,
            "sluice.stream",
            Kind::Internal,
            (start, Instant::now()),
            2,
        )
        .set("sluice.stream.outcome", outcome)
        .set("sluice.tool_calls", tool_calls);
        let message = format!("stream ended: {outcome}");
        let error = (outcome != "complete").then_some((outcome, message.as_str()));
        self.model_ended(usage, Some(head), error);
    }

    /// Closes the request's span with what `trace` says of it and hands
    /// every span to the exporter.
    pub(crate) fn finish(mut self, trace: &Trace) {
        // A model call still open here was cut short (its request's
        // future dropped mid-call).
        let error = trace.error.as_deref().map(|e| ("_OTHER", e));
        self.model_ended(trace.usage, None, error);
        let now = Instant::now();
        let name = format!("{} {}", self.method, trace.route);
        let mut root = Span::new(
            self.trace_id,
            self.parent,
            name,
            Kind::Server,
            self.clock.unix_nanos(self.started),
            self.clock.unix_nanos(now),
        );
        root.span_id = self.root;
        root.remote_parent = self.parent.is_some();
        root.attributes.reserve_exact(12);
        root.set("http.request.method", self.method.clone())
            .set("http.route", trace.route.clone())
            .set("http.response.status_code", trace.status)
            .set("sluice.request_id", trace.request_id.clone())
            .set("sluice.tenant", trace.workspace.clone())
            .set("sluice.thread", trace.thread.clone())
            .set("sluice.attempts", trace.attempts);
        if let Some(m) = &trace.model {
            root.set("sluice.model", m.clone());
        }
        if trace.status >= 500 {
            root.set("error.type", trace.status.to_string());
            root.status = Status::Error(
                trace
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("answered {}", trace.status)),
            );
        }
        self.spans.push(root);
        self.exporter.submit(self.spans);
    }
}

/// `method`'s name, not copied when it is a standard one.
fn method_name(method: &reqwest::Method) -> Cow<'static, str> {
    use reqwest::Method;
    let name = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => return Cow::Owned(method.as_str().to_owned()),
    };
    Cow::Borrowed(name)
}

/// `url` without its query (which may hold a key) nor credentials.
fn without_query(url: &reqwest::Url) -> String {
    // The usual upstream URL has none of them: one copy, no re-parsing.
    if url.query().is_none() && url.username().is_empty() && url.password().is_none() {
        return url.as_str().to_owned();
    }
    let mut u = url.clone();
    u.set_query(None);
    let _ = u.set_password(None);
    let _ = u.set_username("");
    u.to_string()
}

#[cfg(test)]
mod tests;
