use std::sync::Mutex;

use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use bytes::Bytes;

use super::*;
use crate::layers::testing::{Probe, state};
use crate::response::Buffered;

/// A request whose route asks for nothing more than its context.
struct Plain {
    tenant: Tenant,
    headers: HeaderMap,
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
    let svc = ContextLayer::new(&state).layer(probe);
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
    let svc = ContextLayer::new(&state).layer(probe);
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
    let svc = ContextLayer::new(&state).layer(probe);
    let served = call(svc, plain(&state, &[])).await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.into_response().status(), StatusCode::SERVICE_UNAVAILABLE);
}
