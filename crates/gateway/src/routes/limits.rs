//! The limiter API, for agents that call upstreams themselves:
//! acquire / release / report, the state of every resource, and live
//! capacity changes (admin).

use std::time::{Duration, SystemTime};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Capacity, GrantId};
use tokio::time::Instant;

use crate::context::Context;
use crate::error::ApiError;
use crate::state::AppState;

/// The body as `T`; a field of the wrong type is named (serde's own
/// message says only "invalid type … at line 1 column 14").
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field == "." || inner.is_syntax() || inner.is_eof() {
            invalid_json(inner)
        } else {
            ApiError::bad_field(&field, inner)
        }
    })?;
    // Trailing bytes after the value, as `serde_json::from_slice` refuses.
    de.end().map_err(invalid_json)?;
    Ok(value)
}

fn invalid_json(e: serde_json::Error) -> ApiError {
    ApiError::BadRequest {
        message: format!("invalid JSON body: {e}"),
        param: None,
    }
}

fn reply(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// What an acquire or report is about: exactly one of these.
#[derive(Debug)]
struct Target<'a> {
    resource: &'a Option<String>,
    model: &'a Option<String>,
    tool: &'a Option<String>,
}

impl Target<'_> {
    /// The limiter resource, checked against what the gateway knows.
    fn resolve(&self, state: &AppState) -> Result<String, ApiError> {
        match (self.resource, self.model, self.tool) {
            (Some(r), None, None) => {
                let known = state.config.provider_for(r).is_some()
                    || r.strip_prefix("api:")
                        .is_some_and(|a| state.config.api(a).is_some())
                    || r.starts_with(sluice_limit::SESSION_PREFIX)
                    || r.starts_with("tokens:")
                    || r.starts_with("inflight:")
                    || state.limiter.contains(r);
                if !known {
                    return Err(ApiError::NotFound(format!(
                        "unknown resource {r:?}: use a model (`openai/…`), `api:<name>`, `session:<id>`, or configure it with PUT /v1/limits/{{resource}}"
                    )));
                }
                Ok(r.clone())
            }
            (None, Some(m), None) => {
                if state.config.provider_for(m).is_none() {
                    return Err(ApiError::bad_field(
                        "model",
                        format!("unknown model prefix in {m:?}"),
                    ));
                }
                Ok(m.clone())
            }
            (None, None, Some(t)) => state
                .tools
                .classify(t)
                .map(sluice_limit::api_resource)
                .ok_or_else(|| {
                    ApiError::bad_field("tool", format!("no API is configured for tool {t:?}"))
                }),
            _ => Err(ApiError::BadRequest {
                message: "give exactly one of `resource`, `model` or `tool`".into(),
                param: None,
            }),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    resource: Option<String>,
    model: Option<String>,
    tool: Option<String>,
    #[serde(default = "one")]
    cost: u64,
    timeout_ms: Option<u64>,
    priority: Option<String>,
}

fn one() -> u64 {
    1
}

macro_rules! targeted {
    ($t:ty) => {
        impl $t {
            fn target(&self) -> Target<'_> {
                Target {
                    resource: &self.resource,
                    model: &self.model,
                    tool: &self.tool,
                }
            }
        }
    };
}
targeted!(AcquireBody);
targeted!(ReportBody);

fn capacity_json(c: &Capacity) -> Value {
    json!({
        "resource": c.resource,
        "algorithm": c.algorithm.as_str(),
        "capacity": c.total,
        "configured": c.configured,
        "burst": c.burst,
        "window_ms": c.window.as_millis() as u64,
        "available": c.available,
        "in_flight": c.in_flight,
        "waiting": c.waiting,
        "reduced": c.is_reduced(),
        "reduction": if c.configured > 0 { 1.0 - c.total as f64 / c.configured as f64 } else { 0.0 },
        "paused_ms": c.paused_for.map(|p| p.as_millis() as u64),
    })
}

/// `POST /v1/limits/acquire` → `{grant_id, resource, cost, expires_in_ms}`
/// or 429 with `Retry-After` and `RateLimit`/`RateLimit-Policy`.
pub async fn acquire(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    reply(acquire_inner(&state, &headers, &body).await)
}

async fn acquire_inner(
    state: &AppState,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    state.check_open()?;
    let ctx = Context::from_headers(state, headers)?;
    let b: AcquireBody = parse(body)?;
    if let Some(p) = &b.priority {
        p.parse::<sluice_admit::Priority>()
            .map_err(|e| ApiError::bad_field("priority", e))?;
    }
    if b.cost == 0 {
        return Err(ApiError::bad_field("cost", "must be at least 1"));
    }
    let resource = b.target().resolve(state)?;
    let max_wait = state.config.limits_api.max_wait_ms;
    let wait = b.timeout_ms.unwrap_or(0).min(max_wait);
    let deadline = Instant::now() + Duration::from_millis(wait);
    let grant = if wait == 0 {
        state.limits.try_acquire(&resource, b.cost).await
    } else {
        state
            .limits
            .acquire_many(&[(&resource, b.cost)], Some(deadline.min(ctx.deadline)))
            .await
    };
    let grant = match grant {
        Ok(g) => g,
        Err(e) => {
            let policy = state
                .limits
                .get_capacity(&resource)
                .await
                .ok()
                .map(|c| (c.total, c.window));
            return Err(ApiError::from_limit(e, policy));
        }
    };
    let ttl = Duration::from_millis(state.config.limits_api.lease_ttl_ms);
    let id = state
        .limits
        .hold(grant, ttl)
        .map_err(|e| ApiError::from_limit(e, None))?;
    Ok(json!({
        "grant_id": id.to_string(),
        "resource": resource,
        "cost": b.cost,
        "expires_in_ms": ttl.as_millis() as u64,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    grant_id: String,
    actual_cost: Option<u64>,
}

/// `POST /v1/limits/release`.
pub async fn release(State(state): State<AppState>, body: Bytes) -> Response {
    reply((|| {
        let b: ReleaseBody = parse(&body)?;
        let id: u64 = b
            .grant_id
            .parse()
            .map_err(|_| ApiError::bad_field("grant_id", "not a grant id"))?;
        state
            .limits
            .release(GrantId(id), b.actual_cost)
            .map_err(|e| ApiError::from_limit(e, None))?;
        Ok(json!({"released": b.grant_id}))
    })())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportBody {
    resource: Option<String>,
    model: Option<String>,
    tool: Option<String>,
    status: u16,
    retry_after: Option<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    tokens_resource: Option<String>,
}

/// `POST /v1/limits/report`: an upstream's answer (status, Retry-After,
/// rate-limit headers), for adaptive reduction and to keep buckets in step.
pub async fn report(State(state): State<AppState>, body: Bytes) -> Response {
    reply(report_inner(&state, &body).await)
}

async fn report_inner(state: &AppState, body: &Bytes) -> Result<Value, ApiError> {
    let b: ReportBody = parse(body)?;
    if !(100..=599).contains(&b.status) {
        return Err(ApiError::bad_field(
            "status",
            "must be an HTTP status (100–599)",
        ));
    }
    let resource = b.target().resolve(state)?;
    let mut pairs: Vec<(&str, &str)> = b
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(r) = &b.retry_after {
        pairs.push(("retry-after", r.as_str()));
    }
    let limits = RateLimitHeaders::parse(pairs, SystemTime::now());
    if b.retry_after.is_some() && limits.retry_after.is_none() {
        return Err(ApiError::bad_field(
            "retry_after",
            "neither seconds nor an HTTP date",
        ));
    }
    state
        .limits
        .observe(
            Some(&resource),
            b.tokens_resource.as_deref(),
            b.status,
            &limits,
        )
        .await
        .map_err(|e| ApiError::from_limit(e, None))?;
    current(state, &resource).await
}

/// The state of `resource` as JSON.
async fn current(state: &AppState, resource: &str) -> Result<Value, ApiError> {
    let cap = state
        .limits
        .get_capacity(resource)
        .await
        .map_err(|e| ApiError::from_limit(e, None))?;
    Ok(capacity_json(&cap))
}

/// `GET /v1/limits`: every live resource (in distributed mode, those this
/// replica used recently, with their shared state).
pub async fn list(State(state): State<AppState>) -> Response {
    let all: Vec<Value> = state
        .limits
        .capacities()
        .await
        .iter()
        .map(capacity_json)
        .collect();
    Json(json!({"resources": all})).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    capacity: u64,
    window_ms: Option<u64>,
}

/// `PUT /v1/limits/{resource}` (admin token): change capacity live.
/// Not in distributed mode: every replica must agree on the configured
/// capacity, so it is changed in the config of all of them.
pub async fn set(
    State(state): State<AppState>,
    Path(resource): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    reply(set_inner(&state, &resource, &headers, &body).await)
}

async fn set_inner(
    state: &AppState,
    resource: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    admin(state, headers)?;
    let b: SetBody = parse(body)?;
    if b.capacity == 0 {
        return Err(ApiError::bad_field(
            "capacity",
            "must be at least 1 (to drop a limit, restart without it)",
        ));
    }
    if state.limits.redis().is_some() {
        return Err(ApiError::BadRequest {
            message: "limits are shared through Redis ([redis] is set): change them in the \
                      config of every replica"
                .into(),
            param: Some("capacity".into()),
        });
    }
    let window = match b.window_ms {
        Some(0) => return Err(ApiError::bad_field("window_ms", "must be at least 1")),
        Some(ms) => Duration::from_millis(ms),
        None => state
            .limiter
            .get_capacity(resource)
            .map(|c| c.window)
            .unwrap_or(Duration::from_secs(1)),
    };
    state
        .limiter
        .set_capacity(resource, b.capacity, window)
        .map_err(|e| ApiError::from_limit(e, None))?;
    current(state, resource).await
}

/// Checks the admin token.
pub(crate) fn admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &state.config.admin_token else {
        return Err(ApiError::Forbidden(
            "admin calls are disabled: set admin_token".into(),
        ));
    };
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::Unauthorized("missing `Authorization: Bearer <admin token>`".into())
        })?;
    if !constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
        return Err(ApiError::Forbidden("wrong admin token".into()));
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
