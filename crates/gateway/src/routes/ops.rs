//! Health, readiness and metrics.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::layers::auth::{Anyone, Scraper};
use crate::state::AppState;

/// `GET /healthz`: the process is up.
pub async fn healthz(_: Anyone) -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// `GET /`: what this is and where to look next, for a person (or a
/// probe) that opens the bare address.
pub async fn root(_: Anyone) -> Response {
    Json(json!({
        "name": "sluice",
        "version": env!("CARGO_PKG_VERSION"),
        "dashboard": "/ui",
        "api": "/openapi.json",
        "health": "/healthz",
        "ready": "/readyz",
        "metrics": "/metrics",
    }))
    .into_response()
}

/// `GET /readyz`: 503 while draining or overloaded (the admission backlog
/// above twice the dispatch concurrency), with the reasons.
pub async fn readyz(State(state): State<AppState>, _: Anyone) -> Response {
    let mut reasons = Vec::new();
    if state.is_draining() {
        reasons.push("draining");
    }
    // Degraded Redis makes a replica unready only when it fails closed:
    // failing open it still serves (on its share), and pulling every
    // replica out of the balancer at once would be an outage.
    let redis = state.limits.redis.as_ref().map(|r| {
        let degraded = r.is_degraded();
        if degraded && r.config().failure == sluice_redis::Failure::FailClosed {
            reasons.push("redis unreachable: failing closed");
        }
        json!({"degraded": degraded, "failure": r.config().failure.as_str(),
            "mode": r.config().mode.as_str(), "replicas": r.replicas()})
    });
    let damaged = state
        .stores
        .jobs
        .as_ref()
        .and_then(|j| j.damage())
        .map(|d| {
            format!(
                "the job store is damaged ({d}): no jobs are claimed; check it with \
             `sluice check-config --stores` and restore it from a backup"
            )
        });
    if let Some(d) = &damaged {
        reasons.push(d);
    }
    // Busy (waiting at a provider's limit) is the normal state of a gateway
    // doing its job, not a reason to be pulled from a balancer: every
    // replica is busy at once, and pulling them all is an outage. It is
    // said here, and in `sluice_busy`.
    let busy = state.admission.queue.is_busy();
    let status = if reasons.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let queued = state.admission.queue.stats().queued();
    // Not a reason to be unready (a local gateway without tenants is a
    // supported setup), but said here for whoever probes it.
    let auth = if state.is_open() {
        "none: no [[tenants]], every caller is trusted"
    } else {
        "tenant keys"
    };
    let warnings = state.warnings.clone();
    // Each provider's key: one without it answers 503 to callers without
    // their own, which a probe should see before a caller does.
    let providers: serde_json::Map<String, serde_json::Value> = (state.config.providers.iter())
        .map(|p| {
            let s = crate::credentials::key_state(&state.config, p);
            (p.name.clone(), json!(s.as_str()))
        })
        .collect();
    (
        status,
        Json(
            json!({"ready": reasons.is_empty(), "reasons": reasons, "queued": queued,
            "busy": busy,
            "redis": redis, "auth": auth, "providers": providers, "warnings": warnings}),
        ),
    )
        .into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(state): State<AppState>, _: Scraper) -> Response {
    // In memory and cheap: read at every scrape.
    let stats = state.admission.queue.stats();
    for p in sluice_admit::Priority::ALL {
        crate::metrics::queue_depth(p.as_str(), stats.queued_in(p));
    }
    crate::metrics::busy(stats.busy);
    for pool in state.admission.bulkheads.iter() {
        let s = pool.stats();
        crate::metrics::bulkhead(pool.name(), s.in_use, s.waiting);
    }
    if let Some(ledger) = state.observers.ledger.as_ref() {
        let (spilled, lost, queued) = ledger.writer_stats();
        crate::metrics::ledger_writer(spilled, lost, queued);
    }
    // A count over the jobs table and, in distributed mode, Redis reads:
    // at most once per `metrics.refresh_interval_ms`, whoever scrapes.
    state
        .observers
        .gauges
        .run_if_due(|| refresh_gauges(&state))
        .await;
    let body = state.observers.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// The gauges that cost a query: limiter tokens, jobs by queue and
/// state, and the cache's size (a SCAN when it is in Redis).
async fn refresh_gauges(state: &AppState) {
    crate::metrics::cache_stats(&state.spend.cache.stats().await);
    // Models, tokens and APIs only: sessions are per-key (cardinality),
    // and are not even read.
    let wanted = |r: &str| !r.starts_with(sluice_limit::SESSION_PREFIX);
    for c in state.limits.shared.capacities(&wanted).await {
        crate::metrics::available_tokens(&c.resource, c.available);
    }
    if let Some(jobs) = state.stores.jobs.as_ref() {
        jobs.refresh_gauges(state.config.jobs.queues.keys()).await;
    }
}
