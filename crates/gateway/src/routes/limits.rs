//! The limiter API, for agents that call upstreams themselves:
//! acquire / release / report, the state of the resources a tenant may
//! see, and live capacity changes (admin).
//!
//! An acquire waits in the same admission queue as the gateway's own
//! requests (priorities, per-tenant fairness and depth limits, the
//! resource's lane), and the grant it gets belongs to the tenant (see
//! [`crate::limits::holds`]). Sessions are the tenant's own: `session:{x}`
//! names the caller's session `x`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_admit::{Admission, Ticket};
use sluice_limit::Capacity;
use sluice_limit::headers::RateLimitHeaders;
use tokio::time::Instant;

use crate::audit::{ADMIN, Act};
use crate::body::Body;
use crate::error::ApiError;
use crate::layers::auth::{Admin, Tenant};
use crate::layers::context::Context;
use crate::limits::holds::{HoldError, HoldId};
use crate::limits::reports::Verdict;
use crate::limits::resources::{scoped, tokens_resource, unscoped};
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

/// What an acquire is about: exactly one of these.
#[derive(Debug)]
struct Target<'a> {
    resource: &'a Option<String>,
    model: &'a Option<String>,
    tool: &'a Option<String>,
}

impl Target<'_> {
    /// The limiter resource, in `tenant`'s scope: a configured model or
    /// API the caller's key allows (`openai/…`, `api:{name}`, or a tool
    /// classified as one), that model's or API's `tokens:` or `inflight:`
    /// resource, or the caller's own session (`session:x` is the tenant's
    /// session `x`). Nothing else: not another tenant's session or job
    /// group, not the queues' resources, not per-key limits. Every name is
    /// bounded ([`crate::names::check`]) before anything is looked up.
    fn resolve(&self, state: &AppState, tenant: &Tenant) -> Result<String, ApiError> {
        match (self.resource, self.model, self.tool) {
            (Some(r), None, None) => {
                crate::names::check("resource", r)?;
                if r.starts_with(sluice_limit::SESSION_PREFIX) {
                    return Ok(scoped(tenant.name(), r));
                }
                let (kind, bare) = match r.split_once(':') {
                    Some((k @ ("tokens" | "inflight"), rest)) => (Some(k), rest),
                    _ => (None, r.as_str()),
                };
                let unknown = || {
                    ApiError::NotFound(format!(
                        "unknown resource {r:?}: use a configured model (`openai/…`), `api:<name>`, \
                         their `tokens:`/`inflight:` resources, or your `session:<id>`"
                    ))
                };
                if let Some(api) = bare.strip_prefix("api:") {
                    if kind == Some("tokens") || state.config.api(api).is_none() {
                        return Err(unknown());
                    }
                    allow_api(tenant, api)?;
                } else if state.config.provider_for(bare).is_some() {
                    crate::names::check_model_segments(bare)?;
                    allow_model(tenant, bare)?;
                } else {
                    return Err(unknown());
                }
                Ok(r.clone())
            }
            (None, Some(m), None) => {
                crate::names::check("model", m)?;
                if state.config.provider_for(m).is_none() {
                    return Err(ApiError::bad_field(
                        "model",
                        format!("unknown model prefix in {m:?}"),
                    ));
                }
                crate::names::check_model_segments(m)?;
                allow_model(tenant, m)?;
                Ok(m.clone())
            }
            (None, None, Some(t)) => {
                crate::names::check("tool", t)?;
                let api = state.limits.tools.classify(t).ok_or_else(|| {
                    ApiError::bad_field("tool", format!("no API is configured for tool {t:?}"))
                })?;
                allow_api(tenant, api)?;
                Ok(sluice_limit::api_resource(api))
            }
            _ => Err(ApiError::BadRequest {
                message: "give exactly one of `resource`, `model` or `tool`".into(),
                param: None,
            }),
        }
    }
}

/// 403 unless the caller's key and tenant allow `model`.
fn allow_model(tenant: &Tenant, model: &str) -> Result<(), ApiError> {
    if tenant.caller().is_some_and(|c| !c.allows_model(model)) {
        return Err(ApiError::Forbidden(format!(
            "model {model:?} is not allowed for this API key (its `models` allow-list)"
        )));
    }
    Ok(())
}

/// 403 unless the caller's key and tenant allow the API `api`.
fn allow_api(tenant: &Tenant, api: &str) -> Result<(), ApiError> {
    if tenant.caller().is_some_and(|c| !c.allows_api(api)) {
        return Err(ApiError::Forbidden(format!(
            "API {api:?} is not allowed for this API key (its `apis` allow-list)"
        )));
    }
    Ok(())
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

/// A hold refused or unknown, as an answer.
fn hold_error(e: HoldError) -> ApiError {
    match e {
        HoldError::Unknown(_) => ApiError::NotFound(e.to_string()),
        HoldError::Reported(_) => ApiError::Conflict(e.to_string()),
        HoldError::TenantFull { .. } | HoldError::Full(_) => ApiError::RateLimited {
            resource: "limits_api_holds".into(),
            retry_after: Some(Duration::from_secs(1)),
            policy: None,
        },
    }
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
) -> Response {
    reply(acquire_inner(&state, &tenant, &headers, &body).await)
}

async fn acquire_inner(
    state: &AppState,
    tenant: &Tenant,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    state.grace.check_open()?;
    let ctx = Context::from_headers(state, tenant, headers)?;
    let b: AcquireBody = parse(body)?;
    let priority = match &b.priority {
        Some(p) => {
            let p = p
                .parse::<sluice_admit::Priority>()
                .map_err(|e| ApiError::bad_field("priority", e))?;
            crate::layers::context::check_priority(state, tenant, p, "`priority`")?;
            p
        }
        None => ctx.priority,
    };
    if b.cost == 0 {
        return Err(ApiError::bad_field("cost", "must be at least 1"));
    }
    let target = Target {
        resource: &b.resource,
        model: &b.model,
        tool: &b.tool,
    };
    let resource = target.resolve(state, tenant)?;
    // A refusal this tenant reported alone pauses its own acquires of the
    // resource (see `limits::reports`), nobody else's.
    if let Some(wait) = state.limits.reports.paused(tenant.name(), &resource) {
        return Err(ApiError::RateLimited {
            resource: unscoped(tenant.name(), &resource).unwrap_or(resource),
            retry_after: Some(wait.max(Duration::from_secs(1))),
            policy: None,
        });
    }
    state
        .limits
        .holds
        .check(tenant.name())
        .map_err(hold_error)?;
    // The key's and its tenant's own limits (key store), taken with the
    // resource and settled at what was reserved.
    let tokens = resource.starts_with("tokens:").then_some(b.cost);
    let caller = crate::keys::caller_needs(
        state.stores.keystore.as_ref(),
        &state.limits.shared,
        &ctx,
        tokens,
    )?;
    let mut needs: Vec<(&str, u64)> = vec![(resource.as_str(), b.cost)];
    needs.extend(caller.needs.iter().map(|(r, c)| (r.as_str(), *c)));
    let max_wait = state.config.limits_api.max_wait_ms;
    let wait = b.timeout_ms.unwrap_or(0).min(max_wait);
    let deadline = (Instant::now() + Duration::from_millis(wait)).min(ctx.deadline);
    // The resource's lane of the admission queue, as the gateway's own
    // requests for it: one tenant cannot take every place in the
    // limiter's queue, and waits its fair turn behind the others.
    let ticket = Ticket::new(ctx.workspace.clone(), deadline)
        .with_priority(priority)
        .with_lane(resource.as_str());
    let refused = |e: sluice_admit::Error| {
        // Not admitted in time, or not at once: refused on the resource,
        // as the limiter refuses.
        let retry_after = match e {
            sluice_admit::Error::DeadlineExceeded => Duration::from_secs(1),
            sluice_admit::Error::WouldWait { retry_after } => retry_after,
            e => return e.into(),
        };
        ApiError::RateLimited {
            resource: resource.clone(),
            retry_after: Some(retry_after),
            policy: None,
        }
    };
    let grant = if wait == 0 {
        // A call that will not wait takes a free slot of the lane (none
        // is free only while others wait for the resource) or is refused
        // at once: no deadline of its own can pass before it gets there.
        // It gives the slot back before asking the limiter, so that calls
        // that will not wait never refuse one another while one of them
        // waits for the limiter's answer (a round trip with `[redis]`).
        let mut permit = state.admission.queue.try_admit(ticket).map_err(refused)?;
        permit.dispatched();
        drop(permit);
        state.limits.shared.try_acquire_many(&needs).await
    } else {
        let mut permit = match state.admission.queue.admit(ticket).await {
            Ok(Admission::Run(p)) => p,
            Ok(Admission::Joined(_)) => {
                return Err(ApiError::Internal("joined a flight without a key".into()));
            }
            Err(e) => return Err(refused(e)),
        };
        let grant = state
            .limits
            .shared
            .acquire_many(&needs, Some(deadline))
            .await;
        // Through the limiter: the lane's slot goes to the next in line.
        permit.dispatched();
        drop(permit);
        grant
    };
    let grant = match grant {
        Ok(g) => g,
        Err(e) => {
            let policy = state
                .limits
                .shared
                .get_capacity(&resource)
                .await
                .ok()
                .map(|c| (c.total, c.window));
            return Err(ApiError::from_limit(e, policy));
        }
    };
    let ttl = Duration::from_millis(state.config.limits_api.lease_ttl_ms);
    let owner: Arc<str> = Arc::from(tenant.name());
    let id = state
        .limits
        .holds
        .hold(&owner, resource.clone(), b.cost, grant, ttl)
        .map_err(hold_error)?;
    Ok(json!({
        "grant_id": id.to_string(),
        "resource": unscoped(tenant.name(), &resource).unwrap_or(resource),
        "cost": b.cost,
        "max_actual_cost": state.limits.holds.max_settle(b.cost),
        "expires_in_ms": ttl.as_millis() as u64,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    grant_id: String,
    actual_cost: Option<u64>,
}

/// `POST /v1/limits/release`: the caller's own grant, settled at
/// `actual_cost` (cut to `max_actual_cost`) when given.
pub async fn release(State(state): State<AppState>, tenant: Tenant, Body(body): Body) -> Response {
    reply((|| {
        let b: ReleaseBody = parse(&body)?;
        let id = grant_id(&b.grant_id)?;
        let done = state
            .limits
            .holds
            .release(tenant.name(), id, b.actual_cost)
            .map_err(hold_error)?;
        Ok(json!({"released": b.grant_id, "settled_cost": done.settled, "clamped": done.clamped}))
    })())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportBody {
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
pub async fn report(State(state): State<AppState>, tenant: Tenant, Body(body): Body) -> Response {
    reply(report_inner(&state, &tenant, &body).await)
}

async fn report_inner(state: &AppState, tenant: &Tenant, body: &Bytes) -> Result<Value, ApiError> {
    let b: ReportBody = parse(body)?;
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
pub async fn list(State(state): State<AppState>, tenant: Tenant) -> Response {
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
    Json(json!({"resources": all})).into_response()
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
struct SetBody {
    capacity: u64,
    window_ms: Option<u64>,
}

/// `PUT /v1/limits/{resource}` (admin): change capacity live; any debt the
/// resource owes is forgiven (it starts from empty, not below). Not in
/// distributed mode: every replica must agree on the configured capacity,
/// so it is changed in the config of all of them.
pub async fn set(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(resource): Path<String>,
    Body(body): Body,
) -> Response {
    act.answer(reply(set_inner(&state, &act, &resource, &body).await))
}

async fn set_inner(
    state: &AppState,
    act: &Act,
    resource: &str,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let b: SetBody = parse(body)?;
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
