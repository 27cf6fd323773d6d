//! An MCP tool call's spans (`/mcp`'s `tools/call`), by the GenAI
//! conventions for tool execution and the MCP conventions
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/#execute-tool-span>,
//! <https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/>):
//!
//! ```text
//! execute_tool GMAIL_SEND_EMAIL   INTERNAL  the client's span as parent, if it sent one
//! └── sluice.admission            INTERNAL  the queue wait
//! ```
//!
//! One HTTP request to `/mcp` may carry several messages, so the call's
//! own span stands for it (with the request's span id) rather than a
//! span of the HTTP request.

use sluice_otel::{Clock, Exporter, Kind, Span, SpanId, Status, TraceId};
use tokio::time::Instant;

use crate::request::Context;

/// A finished tool call, as its span describes it.
#[derive(Debug)]
pub(crate) struct ToolSpan<'a> {
    /// The name the client called it by.
    pub name: &'a str,
    /// Its server's name.
    pub server: &'a str,
    /// The tool's own name there.
    pub tool: &'a str,
    /// The JSON-RPC id of the client's `tools/call`.
    pub call_id: &'a str,
    /// The API it was limited as, if any.
    pub api: Option<&'a str>,
    /// The status the ledger recorded (200 a result).
    pub status: u16,
    /// Attempts sent upstream.
    pub attempts: u32,
    /// When it began and ended.
    pub span: (Instant, Instant),
    /// When it left the admission queue.
    pub admitted: Instant,
    /// Why it failed, when it did.
    pub error: Option<&'a str>,
}

/// Hands `call`'s spans to `exporter`, when there is one and `ctx`'s
/// request is sampled.
pub(crate) fn tool_call(exporter: Option<&Exporter>, ctx: &Context, call: &ToolSpan<'_>) {
    let Some(exporter) = exporter else { return };
    if ctx.trace.flags & 1 == 0 {
        return;
    }
    let ids = Ids {
        trace_id: ctx.trace.trace_id,
        span_id: ctx.trace.span_id,
        parent: ctx.parent_span,
    };
    let request = (
        ctx.request_id.as_str(),
        ctx.workspace.as_str(),
        ctx.priority.as_str(),
    );
    exporter.submit(spans(&ids, &Clock::at(ctx.started), request, call));
}

/// Where the call's span sits: its trace, its own id (the request's),
/// the client's span.
struct Ids {
    trace_id: TraceId,
    span_id: SpanId,
    parent: Option<SpanId>,
}

/// The call's span and its admission wait's, for the request of `(id,
/// tenant, priority)`.
fn spans(
    ids: &Ids,
    clock: &Clock,
    request: (&str, &str, &'static str),
    call: &ToolSpan<'_>,
) -> Vec<Span> {
    let (request_id, tenant, priority) = request;
    let (start, end) = call.span;
    let mut span = Span::new(
        ids.trace_id,
        ids.parent,
        format!("execute_tool {}", call.name),
        Kind::Internal,
        clock.unix_nanos(start),
        clock.unix_nanos(end),
    );
    span.span_id = ids.span_id;
    span.remote_parent = ids.parent.is_some();
    span.attributes.reserve_exact(14);
    span.set("gen_ai.operation.name", "execute_tool")
        .set("gen_ai.tool.name", call.name.to_owned())
        .set("gen_ai.tool.type", "extension")
        .set("gen_ai.tool.call.id", call.call_id.to_owned())
        .set("mcp.method.name", "tools/call")
        .set("jsonrpc.request.id", call.call_id.to_owned())
        .set("sluice.mcp.server", call.server.to_owned())
        .set("sluice.mcp.tool", call.tool.to_owned())
        .set("sluice.request_id", request_id.to_owned())
        .set("sluice.tenant", tenant.to_owned())
        .set("sluice.attempts", call.attempts)
        .set("sluice.status", call.status);
    if let Some(api) = call.api {
        span.set("sluice.api", api.to_owned());
    }
    if call.status != 200 {
        span.set("error.type", call.status.to_string());
        span.status = Status::Error(
            call.error
                .map_or_else(|| format!("answered {}", call.status), str::to_owned),
        );
    }
    let mut queued = Span::new(
        ids.trace_id,
        Some(ids.span_id),
        "sluice.admission",
        Kind::Internal,
        clock.unix_nanos(start),
        clock.unix_nanos(call.admitted.clamp(start, end)),
    );
    queued.set("sluice.priority", priority);
    vec![queued, span]
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_otel::Value;

    #[test]
    fn a_tool_call_is_an_execute_tool_span_with_the_genai_attributes() {
        let now = Instant::now();
        let call = ToolSpan {
            name: "sim.GMAIL_SEND_EMAIL",
            server: "sim",
            tool: "GMAIL_SEND_EMAIL",
            call_id: "7",
            api: Some("gmail"),
            status: 429,
            attempts: 2,
            span: (now, now),
            admitted: now,
            error: None,
        };
        let ids = Ids {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: Some([3; 8]),
        };
        let batch = spans(&ids, &Clock::at(now), ("r1", "acme", "high"), &call);
        let tool = &batch[1];
        assert_eq!(tool.name, "execute_tool sim.GMAIL_SEND_EMAIL");
        assert_eq!(
            (tool.kind, tool.span_id, tool.parent),
            (Kind::Internal, [2; 8], Some([3; 8]))
        );
        assert!(tool.remote_parent);
        let get = |k: &str| tool.get(k).cloned();
        assert_eq!(
            get("gen_ai.operation.name"),
            Some(Value::from("execute_tool"))
        );
        assert_eq!(
            get("gen_ai.tool.name"),
            Some(Value::from("sim.GMAIL_SEND_EMAIL"))
        );
        assert_eq!(get("gen_ai.tool.call.id"), Some(Value::from("7")));
        assert_eq!(get("mcp.method.name"), Some(Value::from("tools/call")));
        assert_eq!(get("sluice.api"), Some(Value::from("gmail")));
        assert_eq!(get("error.type"), Some(Value::from("429")));
        assert_eq!(tool.status, Status::Error("answered 429".into()));
        let queued = &batch[0];
        assert_eq!(
            (queued.name.as_ref(), queued.parent),
            ("sluice.admission", Some([2; 8]))
        );
        assert_eq!(queued.get("sluice.priority"), Some(&Value::from("high")));
    }
}
