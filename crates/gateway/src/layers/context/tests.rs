use std::sync::Mutex;

use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use bytes::Bytes;
use sluice_admit::Priority;
use tower::Layer;

use super::*;
use crate::layers::testing::{Probe, state};
use crate::response::Buffered;

/// A request whose route asks for nothing more than its context.
struct Plain {
    state: AppState,
    tenant: Tenant,
    headers: HeaderMap,
}

impl crate::layers::step::Stateful for Plain {
    fn state(&self) -> &AppState {
        &self.state
    }
}

impl crate::layers::observe::Routed for Plain {
    fn route(&self) -> &'static str {
        "/plain"
    }
}

impl Parse for Plain {
    type Parsed = Context;

    fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    fn parse(self, _: &AppState, ctx: Context, notes: &mut Notes) -> Result<Context, ApiError> {
        notes.label = Some("plain".into());
        Ok(ctx)
    }
}

fn plain(state: &AppState, headers: &[(&'static str, &'static str)]) -> Plain {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, HeaderValue::from_static(v));
    }
    Plain {
        state: state.clone(),
        tenant: Tenant::from_headers(state, &h).expect("an open gateway"),
        headers: h,
    }
}

fn ok() -> Reply {
    Reply::Buffered(Buffered {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::new(),
    })
}

#[tokio::test]
async fn passes_the_context_down_and_notes_the_request() {
    let state = state();
    let seen = std::sync::Arc::new(Mutex::new(None));
    let probe = {
        let seen = seen.clone();
        Probe::new(move |req: Req<Context>| {
            *seen.lock().unwrap() = Some(req.call.clone());
            Served::ok(ok(), req.notes)
        })
    };
    let svc = ContextLayer::new().layer(probe);
    let req = plain(
        &state,
        &[
            ("x-sluice-workspace", "acme"),
            ("x-request-id", "r-1"),
            ("x-sluice-priority", "high"),
        ],
    );
    let served = call(svc, req).await;
    assert!(served.result.is_ok());
    assert_eq!(served.notes.meta.request_id, "r-1");
    assert_eq!(served.notes.tenant.as_deref(), Some("acme"));
    assert_eq!(served.notes.label.as_deref(), Some("plain"));
    let ctx = seen.lock().unwrap().take().expect("the inner service ran");
    assert_eq!(ctx.workspace, "acme");
    assert!(ctx.client_id);
    assert_eq!(ctx.priority, Priority::High);
}

#[tokio::test]
async fn a_bad_header_is_refused_before_the_stack_below() {
    let state = state();
    let probe = Probe::new(|_: Req<Context>| -> Served<Reply> {
        panic!("a refused request must not go further")
    });
    let svc = ContextLayer::new().layer(probe);
    let req = plain(&state, &[("x-sluice-timeout-ms", "soon")]);
    let served = call(svc, req).await;
    let e = served.result.expect_err("refused");
    assert!(e.to_string().contains("x-sluice-timeout-ms"), "{e}");
    assert_eq!(e.into_response().status(), StatusCode::BAD_REQUEST);
    assert!(served.notes.label.is_none());
}

#[tokio::test]
async fn a_draining_gateway_refuses_with_503() {
    let state = state();
    state.drain();
    let probe = Probe::new(|_: Req<Context>| -> Served<Reply> {
        panic!("a refused request must not go further")
    });
    let svc = ContextLayer::new().layer(probe);
    let served = call(svc, plain(&state, &[])).await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.into_response().status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_bad_request_id_is_replaced_and_a_bad_traceparent_restarts_the_trace() {
    let state = state();
    let seen = std::sync::Arc::new(Mutex::new(None));
    let probe = {
        let seen = seen.clone();
        Probe::new(move |req: Req<Context>| {
            *seen.lock().unwrap() = Some(req.call.clone());
            Served::ok(ok(), req.notes)
        })
    };
    let svc = ContextLayer::new().layer(probe);
    let req = plain(
        &state,
        &[
            ("x-request-id", "two words"),
            (
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            ),
            ("tracestate", "congo=t61rcWkgMzE"),
        ],
    );
    let served = call(svc.clone(), req).await;
    assert!(served.result.is_ok(), "not a refusal");
    let ctx = seen.lock().unwrap().take().expect("the inner service ran");
    assert!(ctx.request_id.starts_with("req_"), "{}", ctx.request_id);
    assert!(!ctx.client_id, "a made-up id does not deduplicate");
    assert_eq!((ctx.parent_span, ctx.tracestate), (None, None));
    assert_ne!(ctx.trace.trace_id, [0; 16]);

    let req = plain(
        &state,
        &[
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "congo=t61rcWkgMzE"),
            ("idempotency-key", "k-1"),
        ],
    );
    call(svc, req).await;
    let ctx = seen.lock().unwrap().take().expect("the inner service ran");
    assert_eq!((ctx.request_id.as_str(), ctx.client_id), ("k-1", true));
    assert_eq!(ctx.trace.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        ctx.parent_span,
        Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7])
    );
    assert_ne!(ctx.trace.span_id, ctx.parent_span.unwrap());
    assert_eq!(ctx.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
}

/// Each header `Context::from_headers` reads, in a header map of its own.
fn read(state: &AppState, headers: &[(&'static str, HeaderValue)]) -> Result<Context, ApiError> {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(*k, v.clone());
    }
    let tenant = Tenant::from_headers(state, &h).expect("an open gateway");
    Context::from_headers(state, &tenant, &h)
}

#[tokio::test]
async fn every_header_read_is_named_when_it_is_not_ascii() {
    let state = state();
    let bad = HeaderValue::from_bytes(b"caf\xe9").unwrap();
    for name in [
        "x-sluice-priority",
        "x-sluice-thread",
        "idempotency-key",
        "x-sluice-timeout-ms",
        "x-sluice-user",
        "x-sluice-feature",
    ] {
        let e = read(&state, &[(name, bad.clone())]).expect_err(name);
        assert!(e.to_string().contains(name), "{name}: {e}");
        assert_eq!(e.into_response().status(), StatusCode::BAD_REQUEST);
    }
    // A request id or trace that is not ASCII is replaced, not refused.
    let ctx = read(
        &state,
        &[("x-request-id", bad.clone()), ("traceparent", bad.clone())],
    )
    .expect("replaced");
    assert!(!ctx.client_id);
    assert_eq!(ctx.parent_span, None);
}

#[tokio::test]
async fn a_header_sent_twice_is_read_by_its_first_value() {
    let state = state();
    let ctx = read(
        &state,
        &[
            ("host", HeaderValue::from_static("gw")),
            ("x-sluice-priority", HeaderValue::from_static("high")),
            ("x-sluice-priority", HeaderValue::from_static("nonsense")),
            ("x-sluice-thread", HeaderValue::from_static("t-1")),
            ("x-sluice-thread", HeaderValue::from_static("t-2")),
            ("x-request-id", HeaderValue::from_static("id-1")),
            ("x-request-id", HeaderValue::from_static("id-2")),
            ("x-sluice-timeout-ms", HeaderValue::from_static("1500")),
            ("x-sluice-user", HeaderValue::from_static("ada")),
            ("x-sluice-feature", HeaderValue::from_static("search")),
            ("x-sluice-feature", HeaderValue::from_static("chat")),
        ],
    )
    .expect("good headers");
    assert_eq!(ctx.priority, Priority::High);
    assert_eq!(ctx.thread.as_deref(), Some("t-1"));
    assert_eq!((ctx.request_id.as_str(), ctx.client_id), ("id-1", true));
    assert_eq!(
        ctx.deadline - ctx.started,
        std::time::Duration::from_millis(1500)
    );
    assert_eq!(ctx.user.as_deref(), Some("ada"));
    assert_eq!(ctx.feature.as_deref(), Some("search"));
    // The first value decides, even when a later one would be refused
    // or kept.
    let e = read(
        &state,
        &[
            ("x-sluice-timeout-ms", HeaderValue::from_static("0")),
            ("x-sluice-timeout-ms", HeaderValue::from_static("10")),
        ],
    )
    .expect_err("the first value is 0");
    assert!(e.to_string().contains("x-sluice-timeout-ms"), "{e}");
}
