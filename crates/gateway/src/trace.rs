//! Per-request traces: timed spans collected while a request runs, written
//! as one JSON object per line to `{dir}/{workspace}/{period}.jsonl` (a UTC
//! day or hour; the thread is a field of the line, never a file name) by a
//! background [`TraceWriter`] that never blocks the request path. The
//! directory is kept within a [`Retention`]: files are cut at a size, the
//! oldest removed past a total size or count, and files whose newest trace
//! is older than a maximum age removed. The line's schema is documented
//! in `docs/observability.md`.
//!
//! Only requests that got as far as admission are traced: one refused for
//! its headers, key or body (400, 401, 404, 413) is counted in
//! `sluice_requests_total` and nowhere else, so a stream of bad requests
//! costs no disk.
//!
//! Span names used by the gateway: `auth`, `queue`, `limiter`, `upstream`
//! (one per attempt, metadata `attempt`, `status`, `provider`) and `stream`.
//!
//! # Secrets
//!
//! A [`TraceRecord`] has no headers and no bodies: API keys and
//! `Authorization` headers have nowhere to go. Span metadata and `error` are
//! written by gateway code, which must not copy a header or a URL with
//! credentials into them.
//!
//! ```
//! use sluice_gateway::trace::Trace;
//!
//! let mut trace = Trace::start("req-1", "acme", "thread-7", "/v1/chat/completions");
//! let queued = trace.open_span("queue");
//! trace.close_span(queued, serde_json::Map::new());
//! trace.status = 200;
//! let record = trace.finish();
//! assert_eq!(record.spans[0].name, "queue");
//! ```

mod line;
mod path;
mod store;
mod writer;

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::time::Instant;

pub(crate) use line::Field;
pub use path::{
    Rotation, file_component, parse_segment, period, segment_name, workspace_dir, workspace_files,
};
pub use store::Retention;
pub use writer::{TraceWriter, TraceWriterTask};

/// A request's trace while it runs.
#[derive(Debug, Clone)]
pub struct Trace {
    /// 32 lowercase hex digits (the W3C trace-id shape): the client's
    /// trace id when it sent a `traceparent`, else a random one, the
    /// same one sent upstream.
    pub trace_id: String,
    /// The request id (`x-request-id`, `Idempotency-Key` or generated).
    pub request_id: String,
    /// The tenant's workspace.
    pub workspace: String,
    /// The thread (`x-sluice-thread`).
    pub thread: String,
    /// The route, e.g. `/v1/chat/completions`.
    pub route: String,
    /// The model finally used.
    pub model: Option<String>,
    /// Tool calls the response asked for.
    pub tool_calls: u32,
    /// Token usage reported by the upstream.
    pub usage: Option<Usage>,
    /// The HTTP status sent to the client.
    pub status: u16,
    /// Upstream attempts made.
    pub attempts: u32,
    /// What went wrong, for a failed request.
    pub error: Option<String>,
    started: Instant,
    started_unix_ms: u64,
    spans: Vec<Span>,
    /// The request's OpenTelemetry spans, when exported and sampled.
    pub(crate) otel: Option<Box<crate::otel::Spans>>,
}

/// Token usage as the upstream reported it.
pub use sluice_usage::Usage;

#[derive(Debug, Clone)]
struct Span {
    name: Cow<'static, str>,
    start: Instant,
    end: Instant,
    metadata: Meta,
}

/// A span's metadata: a map from the public API, or the gateway's own
/// few fields, kept unbuilt until the line is written.
#[derive(Debug, Clone)]
enum Meta {
    Map(Map<String, Value>),
    /// In the order of their names (a map's order on the line).
    Fields(Vec<(&'static str, Field)>),
}

impl Meta {
    fn into_map(self) -> Map<String, Value> {
        match self {
            Meta::Map(m) => m,
            Meta::Fields(fields) => fields
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.into()))
                .collect(),
        }
    }
}

/// A span that has begun; give it to [`Trace::close_span`]. Dropping it
/// records nothing (a cancelled step leaves no half span behind).
#[must_use = "a span is recorded only when closed"]
#[derive(Debug)]
pub struct OpenSpan {
    name: String,
    start: Instant,
}

/// A finished trace, as written: one JSON line. Times are milliseconds,
/// span starts relative to the trace's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// See [`Trace::trace_id`].
    pub trace_id: String,
    /// See [`Trace::request_id`].
    pub request_id: String,
    /// See [`Trace::workspace`].
    pub workspace: String,
    /// See [`Trace::thread`].
    pub thread: String,
    /// See [`Trace::route`].
    pub route: String,
    /// See [`Trace::model`].
    pub model: Option<String>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// From start to finish.
    pub total_ms: f64,
    /// See [`Trace::status`].
    pub status: u16,
    /// See [`Trace::attempts`].
    pub attempts: u32,
    /// See [`Trace::tool_calls`].
    pub tool_calls: u32,
    /// See [`Trace::usage`].
    pub usage: Option<Usage>,
    /// See [`Trace::error`].
    pub error: Option<String>,
    /// In the order they were recorded.
    pub spans: Vec<SpanRecord>,
}

/// One span of a [`TraceRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanRecord {
    /// `auth`, `queue`, `limiter`, `upstream`, `stream`, ….
    pub name: String,
    /// Since the trace's start.
    pub start_ms: f64,
    /// How long it took.
    pub duration_ms: f64,
    /// Details, e.g. `attempt`, `status`, `provider` for `upstream`.
    pub metadata: Map<String, Value>,
}

impl Trace {
    /// Starts a trace now, with a fresh random trace id.
    pub fn start(
        request_id: impl Into<String>,
        workspace: impl Into<String>,
        thread: impl Into<String>,
        route: impl Into<String>,
    ) -> Trace {
        let trace_id = format!("{:032x}", fastrand::u128(..));
        Trace::with_id(trace_id, request_id, workspace, thread, route)
    }

    /// Starts a trace now, in the trace `trace_id` (32 lowercase hex
    /// digits).
    pub(crate) fn with_id(
        trace_id: String,
        request_id: impl Into<String>,
        workspace: impl Into<String>,
        thread: impl Into<String>,
        route: impl Into<String>,
    ) -> Trace {
        let started_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Trace {
            trace_id,
            request_id: request_id.into(),
            workspace: workspace.into(),
            thread: thread.into(),
            route: route.into(),
            model: None,
            tool_calls: 0,
            usage: None,
            status: 0,
            attempts: 0,
            error: None,
            started: Instant::now(),
            started_unix_ms,
            spans: Vec::new(),
            otel: None,
        }
    }

    /// Begins a span now. It does not borrow the trace, so the trace stays
    /// usable (and movable across awaits) while the span is open.
    pub fn open_span(&self, name: impl Into<String>) -> OpenSpan {
        OpenSpan {
            name: name.into(),
            start: Instant::now(),
        }
    }

    /// Ends `span` now and records it with `metadata`.
    pub fn close_span(&mut self, span: OpenSpan, metadata: Map<String, Value>) {
        self.record_span(span.name, span.start, Instant::now(), metadata);
    }

    /// Records a span timed elsewhere. A start before the trace's start
    /// counts as its start; an end before `start` as a zero duration.
    pub fn record_span(
        &mut self,
        name: impl Into<String>,
        start: Instant,
        end: Instant,
        metadata: Map<String, Value>,
    ) {
        self.spans.push(Span {
            name: Cow::Owned(name.into()),
            start,
            end,
            metadata: Meta::Map(metadata),
        });
    }

    /// Records a span of the gateway's own: `fields` in the order of
    /// their names, as a map writes them.
    pub(crate) fn record_fields(
        &mut self,
        name: &'static str,
        start: Instant,
        end: Instant,
        fields: Vec<(&'static str, Field)>,
    ) {
        debug_assert!(fields.is_sorted_by_key(|(k, _)| *k), "{fields:?}");
        self.spans.push(Span {
            name: Cow::Borrowed(name),
            start,
            end,
            metadata: Meta::Fields(fields),
        });
    }

    /// When the trace started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Ends the trace now.
    pub fn finish(self) -> TraceRecord {
        let total = self.started.elapsed();
        let spans = self
            .spans
            .into_iter()
            .map(|s| SpanRecord {
                name: s.name.into_owned(),
                start_ms: ms(s.start.saturating_duration_since(self.started)),
                duration_ms: ms(s.end.saturating_duration_since(s.start)),
                metadata: s.metadata.into_map(),
            })
            .collect();
        TraceRecord {
            trace_id: self.trace_id,
            request_id: self.request_id,
            workspace: self.workspace,
            thread: self.thread,
            route: self.route,
            model: self.model,
            started_unix_ms: self.started_unix_ms,
            total_ms: ms(total),
            status: self.status,
            attempts: self.attempts,
            tool_calls: self.tool_calls,
            usage: self.usage,
            error: self.error,
            spans,
        }
    }
}

/// Milliseconds with microsecond resolution (no `0.30000000000000004`).
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests;
