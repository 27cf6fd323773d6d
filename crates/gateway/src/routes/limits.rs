//! The limiter API, for agents that call upstreams themselves:
//! acquire / release / report, the state of the resources a tenant may
//! see, and live capacity changes (admin).
//!
//! An acquire goes down a stack of its own ([`crate::layers::grants`]):
//! it waits in the same admission queue as the gateway's own requests
//! (priorities, per-tenant fairness and depth limits, the resource's
//! lane), and the grant it gets belongs to the tenant (see
//! [`crate::limits::holds`]). Sessions are the tenant's own: `session:{x}`
//! names the caller's session `x`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_limit::Capacity;
use sluice_limit::headers::RateLimitHeaders;
use tokio::time::Instant;

use crate::audit::{ADMIN, Act};
use crate::body::{ApiJson, Body};
use crate::error::ApiError;
use crate::layers::auth::{Admin, Tenant};
use crate::layers::grants::{self, Acquire, Target, hold_error};
use crate::layers::{self};
use crate::limits::holds::HoldId;
use crate::limits::reports::Verdict;
use crate::limits::resources::{tokens_resource, unscoped};
use crate::state::AppState;

fn capacity_json(c: &Capacity, name: &str) -> Value {
    json!({
        "resource": name,
        "algorithm": c.algorithm.as_str(),
        "capacity": c.total,
        "configured": c.configured,
        "burst": c.burst,
        "window_ms": c.window.as_millis() as u64,
        "available": c.available,
        "in_flight": c.in_flight,
        "waiting": c.waiting,
        "per_second": c.per_second(),
        "configured_per_second": c.configured_per_second(),
        "reduced": c.is_reduced(),
        "reduction": if c.configured > 0 { (1.0 - c.per_second() / c.configured_per_second()).max(0.0) } else { 0.0 },
        "paused_ms": c.paused_for.map(|p| p.as_millis() as u64),
        "jitter_margin_ms": c.jitter_margin.as_secs_f64() * 1e3,
        "announced_per_second": c.announced_per_second,
        "reason": c.reason,
    })
}

fn grant_id(raw: &str) -> Result<HoldId, ApiError> {
    HoldId::parse(raw).ok_or_else(|| {
        ApiError::bad_field("grant_id", "not a grant id (32 hex digits, from acquire)")
    })
}

/// `POST /v1/limits/acquire` → `{grant_id, resource, cost, expires_in_ms}`
/// or 429 with `Retry-After` and `RateLimit`/`RateLimit-Policy`.
pub async fn acquire(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    let acquire = Acquire {
        state,
        tenant,
        headers,
        body,
    };
    layers::call(grants::stack(), acquire).await.map(Json)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseBody {
    grant_id: String,
    actual_cost: Option<u64>,
}

/// `POST /v1/limits/release`: the caller's own grant, settled at
/// `actual_cost` (cut to `max_actual_cost`) when given.
pub(crate) async fn release(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(b): ApiJson<ReleaseBody>,
) -> Result<Json<Value>, ApiError> {
    let id = grant_id(&b.grant_id)?;
    let done = state
        .limits
        .holds
        .release(tenant.name(), id, b.actual_cost)
        .map_err(hold_error)?;
    Ok(Json(
        json!({"released": b.grant_id, "settled_cost": done.settled, "clamped": done.clamped}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportBody {
    grant_id: Option<String>,
    resource: Option<String>,
    model: Option<String>,
    tool: Option<String>,
    status: u16,
    retry_after: Option<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

/// `POST /v1/limits/report`: an upstream's answer (status, Retry-After,
/// rate-limit headers) to the call the caller made under one of its held
/// grants, for adaptive reduction and to keep buckets in step. One report
/// per grant, before it is released.
pub(crate) async fn report(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(b): ApiJson<ReportBody>,
) -> Result<Json<Value>, ApiError> {
    report_of(&state, &tenant, b).await.map(Json)
}

async fn report_of(state: &AppState, tenant: &Tenant, b: ReportBody) -> Result<Value, ApiError> {
    let owner: Arc<str> = Arc::from(tenant.name());
    state
        .limits
        .reports
        .count(&owner)
        .map_err(|too_many| ApiError::RateLimited {
            resource: "limits_api_reports".into(),
            retry_after: Some(too_many.retry_after.max(Duration::from_secs(1))),
            policy: None,
        })?;
    if b.headers.len() > 64 {
        return Err(ApiError::bad_field("headers", "more than 64 headers"));
    }
    if !(100..=599).contains(&b.status) {
        return Err(ApiError::bad_field(
            "status",
            "must be an HTTP status (100–599)",
        ));
    }
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
    let raw = b.grant_id.as_deref().ok_or_else(|| {
        ApiError::bad_field(
            "grant_id",
            "is required: a report is about the call made under a grant you hold",
        )
    })?;
    let id = grant_id(raw)?;
    let named = (b.resource.is_some() || b.model.is_some() || b.tool.is_some())
        .then(|| {
            Target {
                resource: &b.resource,
                model: &b.model,
                tool: &b.tool,
            }
            .resolve(state, tenant)
        })
        .transpose()?;
    let resource = state
        .limits
        .holds
        .report(tenant.name(), id)
        .map_err(hold_error)?;
    if let Some(named) = named.filter(|n| *n != resource) {
        return Err(ApiError::bad_field(
            "resource",
            format!("grant {raw} holds {resource:?}, not {named:?}"),
        ));
    }
    // A model's token quota (its `tokens:` resource, when limited) is
    // kept in step by the same answer's token headers.
    let (requests, tokens) = if resource.starts_with("tokens:") {
        (None, Some(resource.clone()))
    } else {
        let tokens = state
            .config
            .model_limits(&resource)
            .filter(|l| l.tokens_per_minute.is_some())
            .map(|_| tokens_resource(&resource));
        (Some(resource.clone()), tokens)
    };
    // A tenant's word alone never lowers what others share (see
    // `limits::reports`): a refusal, or headers that would lower the
    // bucket, pause only the reporter's own acquires until another
    // tenant agrees. Its own sessions, and an open gateway's callers, are
    // taken at their word.
    let shared = !resource.starts_with(sluice_limit::SESSION_PREFIX) && !state.is_open();
    let verdict = if !shared {
        Verdict::Shared
    } else if b.status == 429 {
        let wait = limits
            .throttle_wait()
            .unwrap_or(Duration::from_secs(60))
            .max(Duration::from_secs(1));
        state.limits.reports.refusal(&owner, &resource, wait)
    } else if !b.headers.is_empty() || b.retry_after.is_some() {
        Verdict::Ignored
    } else {
        Verdict::Shared
    };
    let name = unscoped(tenant.name(), &resource).unwrap_or_else(|| resource.clone());
    let entry = sluice_audit::NewEntry::now(tenant.actor(), "limit.report", &name).after(json!({
        "status": b.status,
        "applied": verdict.as_str(),
        "own_pause_ms": own_pause_ms(verdict),
    }));
    state.observers.record(entry);
    if verdict != Verdict::Shared {
        let mut answer = current(state, tenant.name(), &resource).await?;
        answer["applied"] = json!(verdict.as_str());
        answer["own_pause_ms"] = json!(own_pause_ms(verdict));
        return Ok(answer);
    }
    // A reduction this report causes is the reporter's in the audit trail.
    // The call is made inside the scope: the in-process limiter does its
    // work when called, not when polled.
    let observed = async {
        state
            .limits
            .shared
            .observe(
                None,
                requests.as_deref(),
                tokens.as_deref(),
                b.status,
                &limits,
            )
            .await
    };
    crate::audit::caused_by(tenant.actor().into(), observed)
        .await
        .map_err(|e| ApiError::from_limit(e, None))?;
    let mut answer = current(state, tenant.name(), &resource).await?;
    answer["applied"] = json!("shared");
    Ok(answer)
}

/// How long the reporter's own acquires now wait, for a report that
/// paused only them.
fn own_pause_ms(verdict: Verdict) -> Option<u64> {
    match verdict {
        Verdict::Own(until) => {
            Some(until.saturating_duration_since(Instant::now()).as_millis() as u64)
        }
        Verdict::Shared | Verdict::Ignored => None,
    }
}

/// The state of `resource` as JSON, named as `tenant` knows it.
async fn current(state: &AppState, tenant: &str, resource: &str) -> Result<Value, ApiError> {
    let cap = state
        .limits
        .shared
        .get_capacity(resource)
        .await
        .map_err(|e| ApiError::from_limit(e, None))?;
    let name = unscoped(tenant, resource).unwrap_or_else(|| resource.to_owned());
    Ok(capacity_json(&cap, &name))
}

/// `GET /v1/limits`: the live resources the caller may see: the shared
/// ones (models, tokens, APIs, the job queues' own limits) and its own
/// sessions and job groups (in distributed mode, those this replica used
/// recently, with their shared state).
pub async fn list(State(state): State<AppState>, tenant: Tenant) -> Json<Value> {
    let visible =
        |r: &str| unscoped(tenant.name(), r).is_some() && own_jobs(&state, tenant.name(), r);
    // Other tenants' sessions and job groups are not even read.
    let all: Vec<Value> = state
        .limits
        .shared
        .capacities(&visible)
        .await
        .iter()
        .filter(|c| own_jobs(&state, tenant.name(), &c.resource))
        .filter_map(|c| unscoped(tenant.name(), &c.resource).map(|name| capacity_json(c, &name)))
        .collect();
    Json(json!({"resources": all, "pools": state.limits.pools.views()}))
}

/// Whether `resource` is not a job group of another tenant: a queue's own
/// limit (`jobs:{queue}`) is shared, a group's (`jobs:{queue}:{tenant}:{group}`)
/// is its tenant's; any other name is not a job resource.
fn own_jobs(state: &AppState, tenant: &str, resource: &str) -> bool {
    let Some(rest) = resource.strip_prefix("jobs:") else {
        return true;
    };
    state
        .config
        .jobs
        .queues
        .keys()
        .any(|q| match rest.strip_prefix(q.as_str()) {
            Some("") => true,
            Some(below) => below
                .strip_prefix(':')
                .and_then(|b| b.strip_prefix(tenant))
                .is_some_and(|b| b.starts_with(':')),
            None => false,
        })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetBody {
    capacity: u64,
    window_ms: Option<u64>,
}

/// `PUT /v1/limits/{resource}` (admin): change capacity live; any debt the
/// resource owes is forgiven (it starts from empty, not below). Not in
/// distributed mode: every replica must agree on the configured capacity,
/// so it is changed in the config of all of them.
pub(crate) async fn set(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(resource): Path<String>,
    ApiJson(b): ApiJson<SetBody>,
) -> Result<(Act, Json<Value>), ApiError> {
    let answer = set_capacity(&state, &act, &resource, b).await?;
    Ok((act, Json(answer)))
}

async fn set_capacity(
    state: &AppState,
    act: &Act,
    resource: &str,
    b: SetBody,
) -> Result<Value, ApiError> {
    if b.capacity == 0 {
        return Err(ApiError::bad_field(
            "capacity",
            "must be at least 1 (to drop a limit, restart without it)",
        ));
    }
    if state.limits.redis.is_some() {
        return Err(ApiError::BadRequest {
            message: "limits are shared through Redis ([redis] is set): change them in the \
                      config of every replica"
                .into(),
            param: Some("capacity".into()),
        });
    }
    let was = state.limits.limiter.get_capacity(resource).ok();
    let window = match b.window_ms {
        Some(0) => return Err(ApiError::bad_field("window_ms", "must be at least 1")),
        Some(ms) => Duration::from_millis(ms),
        None => was.as_ref().map_or(Duration::from_secs(1), |c| c.window),
    };
    state
        .limits
        .limiter
        .set_capacity(resource, b.capacity, window)
        .map_err(|e| ApiError::from_limit(e, None))?;
    let cap = state
        .limits
        .shared
        .get_capacity(resource)
        .await
        .map_err(|e| ApiError::from_limit(e, None))?;
    let limit =
        |c: &Capacity| json!({"capacity": c.total, "window_ms": c.window.as_millis() as u64});
    let mut entry = act.entry(ADMIN, "limit.set", resource).after(limit(&cap));
    if let Some(was) = &was {
        entry = entry.before(limit(was));
    }
    state.observers.record(entry);
    Ok(capacity_json(&cap, resource))
}

#[cfg(test)]
#[path = "limits/tests.rs"]
mod tests;
