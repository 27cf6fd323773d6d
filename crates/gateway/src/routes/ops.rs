//! Health, readiness, metrics, and the body cap.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: 503 while draining or overloaded (the admission backlog
/// above twice the dispatch concurrency), with the reasons.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let mut reasons = Vec::new();
    if state.is_draining() {
        reasons.push("draining");
    }
    // Degraded Redis makes a replica unready only when it fails closed:
    // failing open it still serves (on its share), and pulling every
    // replica out of the balancer at once would be an outage.
    let redis = state.limits.redis().map(|r| {
        let degraded = r.is_degraded();
        if degraded && r.config().failure == sluice_redis::Failure::FailClosed {
            reasons.push("redis unreachable: failing closed");
        }
        json!({"degraded": degraded, "failure": r.config().failure.as_str(),
            "mode": r.config().mode.as_str(), "replicas": r.replicas()})
    });
    if state.queue.is_busy() {
        reasons.push(
            "busy: the admission backlog exceeds twice the dispatch concurrency per waiting lane",
        );
    }
    let status = if reasons.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let queued = state.queue.stats().queued();
    (
        status,
        Json(
            json!({"ready": reasons.is_empty(), "reasons": reasons, "queued": queued,
            "redis": redis}),
        ),
    )
        .into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(state): State<AppState>) -> Response {
    // Gauges are read at scrape time: the limiter and the queue know them.
    let stats = state.queue.stats();
    for p in sluice_admit::Priority::ALL {
        crate::metrics::queue_depth(p.as_str(), stats.queued_in(p));
    }
    crate::metrics::busy(stats.busy);
    // Models, tokens and APIs only: sessions are per-key (cardinality).
    for c in state.limits.capacities().await {
        if !c.resource.starts_with(sluice_limit::SESSION_PREFIX) {
            crate::metrics::available_tokens(&c.resource, c.available);
        }
    }
    if let Some(jobs) = state.jobs.get() {
        jobs.refresh_gauges(state.config.jobs.queues.keys()).await;
    }
    let body = state.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// Refuses bodies over `limit` bytes with 413, whether or not they say
/// their length up front.
pub async fn body_limit(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return closing(ApiError::PayloadTooLarge { limit });
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return closing(ApiError::PayloadTooLarge { limit });
        }
        Err(e) => {
            return closing(ApiError::BadRequest {
                message: format!("reading the request body: {e}"),
                param: None,
            });
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// An error answered before the request body was read to its end. The
/// server closes such a connection (the rest of the body is still on it),
/// and says so: without `Connection: close` a client would put the
/// connection back in its pool and its next request would fail on it.
fn closing(e: ApiError) -> Response {
    let mut res = e.into_response();
    res.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    res
}
