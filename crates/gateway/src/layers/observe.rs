//! Observe: the request's metrics and trace, fired from this one place
//! when its answer is known (a streamed answer's trace when its stream
//! ends), and the gateway's own response headers.
//!
//! The outermost layer, so that it sees every answer, refusals included:
//! `sluice_requests_total` counts a request refused for its headers or
//! body; the trace exists only once a layer below started it.

use std::future::Future;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use sluice_admit::Priority;
use tokio::time::Instant;
use tower::Layer;

use super::step::Stateful;
use super::upstream::{AttemptRecord, Plan, Upstream};
use super::{Fields, Next, Notes, Reply, Served, call};
use crate::access;
use crate::error::ApiError;
use crate::ledger::{Draft, Handed};
use crate::metrics;
use crate::request::Context;
use crate::state::AppState;
use crate::trace::{Field, Trace, TraceWriter};
use sluice_usage::{AnswerHead, Usage};

/// A request that knows its route (the metrics label).
pub(crate) trait Routed {
    /// The route, as metrics name it.
    fn route(&self) -> &'static str;

    /// The model or API it names, as metrics label it, when known before
    /// the request is read (a later layer may name it instead).
    fn label(&self, _state: &AppState) -> Option<String> {
        None
    }
}

/// Wraps a stack in [`Observe`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ObserveLayer;

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe { inner }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Observe<S> {
    inner: S,
}

impl<R, S> Next<R, Response> for Observe<S>
where
    R: Routed + Stateful + Send + 'static,
    S: Next<R, Served<Reply>>,
{
    fn call(self, req: R) -> impl Future<Output = Response> + Send + 'static {
        let state = req.state().clone();
        let inner = self.inner;
        let route = req.route();
        let label = req.label(&state);
        async move {
            let started = Instant::now();
            let Served { result, mut notes } = call(inner, req).await;
            notes.unanswered = None;
            if notes.label.is_none() {
                notes.label = label;
            }
            let (mut res, error) = match result {
                Ok(reply) => {
                    if let (Reply::Cached(_) | Reply::Joined(_), Some(d)) =
                        (&reply, notes.ledger.as_mut())
                    {
                        d.cache_hit();
                    }
                    if let Some(d) = notes.ledger.as_mut().filter(|d| d.keeps_bodies()) {
                        answered(d, &reply);
                    }
                    (reply.into_response(), None)
                }
                Err(e) => {
                    if let ApiError::QueueFull { scope, .. } = &e {
                        metrics::queue_rejected(scope);
                    }
                    if let Some(d) = notes.ledger.as_mut().filter(|d| d.keeps_bodies()) {
                        d.answered(&error_body(&e));
                    }
                    let message = e.to_string();
                    (e.into_response(), Some(message))
                }
            };
            notes.meta.apply(&mut res);
            let status = res.status().as_u16();
            let elapsed = started.elapsed();
            metrics::request_duration(route, elapsed.as_secs_f64());
            if state.config.ui.enabled {
                state.observers.board.pulse.record(
                    notes.pulse.lane.as_deref(),
                    notes.tenant.as_deref(),
                    &notes.pulse,
                    status,
                    elapsed,
                );
            }
            if let Some(call) = ended(&state, route, status, error, &mut notes) {
                res.extensions_mut().insert(call);
            }
            res
        }
    }
}

/// The whole answer `reply`'s body, for the request log (a stream's is
/// kept as it is relayed; a cached answer's is not read again).
fn answered(draft: &mut Draft, reply: &Reply) {
    let whole = match reply {
        Reply::Buffered(b) => Some(&b.body),
        Reply::Joined(shared) => match &**shared {
            Ok(b) => Some(&b.body),
            Err(e) => {
                draft.answered(&error_body(e));
                None
            }
        },
        Reply::Stream(_) | Reply::Cached(_) => None,
    };
    if let Some(body) = whole {
        draft.answered(body);
    }
}

/// The JSON body the client gets for `e`.
fn error_body(e: &ApiError) -> bytes::Bytes {
    bytes::Bytes::from(e.body().to_string())
}

/// The request on `route` ended with `status` (and `error`, the refusal's
/// message): its count, ledger record and trace; what its access line
/// tells of it, when access lines are written.
fn ended(
    state: &AppState,
    route: &'static str,
    status: u16,
    error: Option<String>,
    notes: &mut Fields,
) -> Option<access::Call> {
    let label = notes.label.as_deref().unwrap_or("-");
    state
        .observers
        .metrics
        .request(route, label, status, notes.tenant.as_deref());
    let logged = access::on();
    let mut call = None;
    if let Some(draft) = notes.ledger.take() {
        call = settled(state, draft, status, notes, logged);
    }
    if let Some(mut trace) = notes.trace.take() {
        trace.status = status;
        trace.attempts = notes.meta.attempts;
        trace.error = error;
        submit(state.observers.traces.as_ref(), trace);
    }
    if !logged {
        return None;
    }
    // Without a ledger record: what the notes know.
    Some(call.unwrap_or_else(|| access::Call {
        tenant: notes.tenant.clone(),
        target: notes.label.clone(),
        queue_ms: u64::try_from(notes.meta.queued.as_millis()).unwrap_or(u64::MAX),
        ..access::Call::default()
    }))
}

/// Status of a request dropped before its answer, as nginx logs a client
/// that closed the connection first.
pub(crate) const ABANDONED: u16 = 499;

/// The request on `route` with these notes was dropped before its answer
/// (see [`Fields`]'s `Drop`): its count, ledger record and trace, as
/// status [`ABANDONED`].
pub(crate) fn abandoned(route: &'static str, notes: &mut Fields) {
    let state = notes.state.clone();
    let error = "the connection closed before the answer".to_owned();
    if let Some(call) = ended(&state, route, ABANDONED, Some(error), notes) {
        // No edge sees this answer: its line is written here.
        let id = notes.meta.request_id.clone();
        let took = Duration::from_millis(call.queue_ms.saturating_add(call.upstream_ms));
        access::line("-", route, ABANDONED, took, &id, Some(&call));
    }
}

/// The trace of `ctx`'s request on `route` (`method` on the wire), from
/// its arrival: in the client's trace when it sent one, with its
/// OpenTelemetry spans when they are exported and the request sampled.
pub(crate) fn begin_trace(
    state: &AppState,
    ctx: &Context,
    route: impl Into<String>,
    method: impl Into<std::borrow::Cow<'static, str>>,
) -> Trace {
    // The client's trace when it sent one: its lines join its spans.
    let mut trace = Trace::with_id(
        ctx.trace.trace_id_hex(),
        ctx.request_id.clone(),
        ctx.workspace.clone(),
        ctx.thread.clone().unwrap_or_else(|| NO_THREAD.to_owned()),
        route,
    );
    trace.otel = crate::otel::Spans::start(state.observers.otel.as_ref(), ctx, method);
    trace
}

/// The thread name of traces for requests without `x-sluice-thread`.
const NO_THREAD: &str = "unthreaded";

/// Hands a call's ledger record over, answered `status` now; what it
/// tells the access line, when `logged`.
pub(crate) fn settled(
    state: &AppState,
    draft: Draft,
    status: u16,
    notes: &mut Fields,
    logged: bool,
) -> Option<access::Call> {
    let ledger = state.observers.ledger.as_ref()?;
    let record = draft.finish(status, notes.meta.queued, notes.meta.attempts);
    let call = logged.then(|| access::Call::of(&record));
    match notes.trace.as_mut().and_then(|t| t.otel.as_mut()) {
        Some(o) => {
            let h = ledger.submit_timed(record);
            o.ledger((h.start, h.end), h.cost_nanos, h.estimated, h.queued);
        }
        None => ledger.submit(record),
    }
    call
}

/// A request admitted after waiting `waited` in its class: the queue's
/// histogram and the trace's `queue` span (from `started`, now).
pub(crate) fn queued(notes: &mut Notes, priority: Priority, started: Instant, waited: Duration) {
    metrics::queue_wait(priority.as_str(), waited.as_secs_f64());
    notes.pulse.queue_wait = Some(waited);
    if let Some(t) = notes.trace.as_mut() {
        let now = Instant::now();
        let fields = vec![("priority", Field::Static(priority.as_str()))];
        t.record_fields("queue", started, now, fields);
        if let Some(o) = t.otel.as_mut() {
            o.queued(started, now, priority.as_str());
        }
    }
}

/// The response cache looked the request up from `started` until now
/// (`result`: `hit`, `miss` or `bypass`).
pub(crate) fn cache_looked(notes: &mut Notes, started: Instant, result: &'static str) {
    if let Some(o) = notes.trace.as_mut().and_then(|t| t.otel.as_mut()) {
        o.cache(started, result);
    }
}

/// A call moves from model `from` to its fallback `to`.
pub(crate) fn fell_back(notes: &mut Notes, from: &str, to: &str) {
    metrics::fallback(from, to);
    notes.label = Some(to.to_owned());
    tracing::info!(from = %from, to = %to, "falling back");
}

/// The limiter refused `resource` (`reason` is a metrics label).
pub(crate) fn refused(resource: &str, reason: &'static str) {
    metrics::limiter_refusal(resource, reason);
}

/// The limiter granted `plan`'s needs to an attempt that began to wait at
/// `since`.
pub(crate) fn granted(plan: &Plan, since: Instant) {
    metrics::limiter_wait(&plan.requests, since.elapsed().as_secs_f64());
    for (resource, cost) in &plan.needs {
        metrics::tokens_acquired(resource, *cost);
    }
}

/// One attempt at `up`: its latency and outcome, and two trace spans
/// (the limiter wait before it, then the call).
pub(crate) fn attempt(notes: &mut Notes, up: &Upstream, a: &AttemptRecord) {
    let plan = &up.plan;
    metrics::upstream_latency(&plan.label, (a.ended - a.sent).as_secs_f64());
    metrics::upstream_attempt(&plan.label, a.outcome);
    notes.pulse.attempts += 1;
    // A fallback model's attempts count against it, not the lane's model.
    if notes.pulse.lane.as_deref() != Some(plan.requests.as_str()) {
        notes.pulse.lane = Some(plan.requests.as_str().into());
    }
    if a.status == Some(429) {
        metrics::upstream_429(&plan.requests);
        notes.pulse.throttled += 1;
    }
    if let Some(trace) = notes.trace.as_mut() {
        let attempt = Field::Number(a.attempt.into());
        let limiter = vec![
            ("attempt", attempt.clone()),
            ("resource", Field::Text(plan.name.clone())),
        ];
        trace.record_fields("limiter", a.limiter_start, a.sent, limiter);
        let mut upstream = Vec::with_capacity(5);
        upstream.push(("attempt", attempt));
        // A pooled call names the deployment each attempt went to (the
        // fields are in the order of their names).
        if let Some(d) = plan.requests.strip_prefix(crate::config::DEPLOYMENT_PREFIX) {
            upstream.push(("deployment", Field::Text(d.to_owned())));
        }
        upstream.push(("outcome", Field::Static(a.outcome)));
        if let Some(s) = a.status {
            upstream.push(("status", Field::Number(s.into())));
        }
        upstream.push(("upstream", Field::Text(plan.label.clone())));
        trace.record_fields("upstream", a.sent, a.ended, upstream);
        if let Some(o) = trace.otel.as_mut() {
            let out = &up.outgoing;
            o.attempt(&up.plan.name, (&out.method, &out.url), a);
        }
    }
}

/// An upstream 429 asked to wait `wait`.
pub(crate) fn retry_after(wait: Duration) {
    metrics::retry_after(wait.as_secs_f64());
}

/// `plan`'s call goes again after an attempt that ended in `outcome`.
pub(crate) fn retry(notes: &mut Notes, plan: &Plan, outcome: &'static str) {
    metrics::retry(&plan.label, outcome);
    notes.pulse.retries += 1;
}

/// The client of a stream on `route` went away before its end.
pub(crate) fn disconnected(route: &'static str) {
    metrics::stream_disconnect(route);
}

/// How a streamed answer ended (`outcome`: `complete`,
/// `client_disconnected`, `upstream_error`, `deadline`, `shutdown`), with what was
/// read of it and how its ledger record went.
pub(crate) struct StreamEnd {
    pub outcome: &'static str,
    pub usage: Option<Usage>,
    pub tool_calls: u32,
    /// What the answer said of itself, read when its spans are exported.
    pub head: Option<AnswerHead>,
    pub handed: Option<Handed>,
}

/// A streamed answer ended: its trace gets the `stream` span from
/// `started`, the usage and tool calls read, and goes to the writer.
pub(crate) fn stream_ended(
    writer: Option<&TraceWriter>,
    trace: Option<Trace>,
    started: Instant,
    end: StreamEnd,
) {
    let Some(mut t) = trace else {
        return;
    };
    let StreamEnd {
        outcome,
        usage,
        tool_calls,
        head,
        handed,
    } = end;
    let fields = vec![("outcome", Field::Static(outcome))];
    t.record_fields("stream", started, Instant::now(), fields);
    if let Some(o) = t.otel.as_mut() {
        if let Some(h) = &handed {
            o.ledger((h.start, h.end), h.cost_nanos, h.estimated, h.queued);
        }
        o.stream(
            started,
            outcome,
            (usage, head.unwrap_or_default()),
            tool_calls,
        );
    }
    t.usage = usage;
    t.tool_calls = tool_calls;
    if outcome != "complete" {
        t.error = Some(format!("stream ended: {outcome}"));
    }
    submit(writer, t);
}

/// Hands a finished trace to the writer, when traces are on, and its
/// OpenTelemetry spans to the exporter.
pub(crate) fn submit(writer: Option<&TraceWriter>, mut trace: Trace) {
    if let Some(spans) = trace.otel.take() {
        spans.finish(&trace);
    }
    if let Some(w) = writer {
        w.submit_trace(trace);
    }
}
