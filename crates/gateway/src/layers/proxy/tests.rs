use axum::http::StatusCode;
use axum::response::IntoResponse;

use super::*;
use crate::layers::testing::state;

fn parse(
    state: &AppState,
    method: Method,
    api: &str,
    headers: &[(&'static str, &'static str)],
) -> (Result<Call, ApiError>, Notes) {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, HeaderValue::from_static(v));
    }
    let tenant = Tenant::from_headers(state, &h).expect("an open gateway");
    let ctx = Context::from_headers(state, &tenant, &h).expect("good headers");
    let incoming = Incoming {
        state: state.clone(),
        tenant,
        method,
        api: api.to_owned(),
        rest: "v1/things/a%20b".into(),
        query: Some("x=1".into()),
        headers: h,
        body: Bytes::from_static(b"{}"),
    };
    let mut notes = Notes::new(state);
    (incoming.parse(state, ctx, &mut notes), notes)
}

#[tokio::test]
async fn only_calls_safe_to_repeat_are_retried() {
    let state = state();
    let api = state.config.apis[0].name.clone();
    let retryable = |method, headers| {
        let (call, _) = parse(&state, method, &api, headers);
        call.expect("a good call").upstream.plan.retryable
    };
    assert!(retryable(Method::GET, &[]));
    assert!(retryable(Method::PUT, &[]));
    assert!(!retryable(Method::POST, &[]));
    assert!(retryable(Method::POST, &[("idempotency-key", "k-1")]));
}

#[tokio::test]
async fn the_call_goes_to_the_api_with_the_forwarded_headers_only() {
    let state = state();
    let cfg = state.config.apis[0].clone();
    let headers = [
        ("content-type", "application/json"),
        ("cookie", "session=1"),
        ("x-sluice-priority", "high"),
    ];
    let (call, notes) = parse(&state, Method::POST, &cfg.name, &headers);
    let call = call.expect("a good call");
    let out = &call.upstream.outgoing;
    assert!(
        out.url
            .as_str()
            .starts_with(cfg.base_url.trim_end_matches('/'))
    );
    assert!(
        out.url.as_str().ends_with("/v1/things/a%20b?x=1"),
        "{}",
        out.url
    );
    assert_eq!(out.headers.get("content-type").unwrap(), "application/json");
    assert!(out.headers.get("cookie").is_none());
    assert!(out.headers.get("x-sluice-priority").is_none());
    assert_eq!(call.upstream.plan.pool, "api");
    assert!(notes.trace.is_some(), "traced once accepted");
}

#[tokio::test]
async fn an_unknown_api_is_a_404_that_costs_no_trace() {
    let state = state();
    let (call, notes) = parse(&state, Method::GET, "nowhere", &[]);
    let e = call.expect_err("refused");
    assert_eq!(e.into_response().status(), StatusCode::NOT_FOUND);
    assert!(notes.trace.is_none());
}
