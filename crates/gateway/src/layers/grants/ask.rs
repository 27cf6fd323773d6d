//! The acquire as the limiter API reads it: the caller's context, its
//! body and the resource it names ([`Target`]), checked before it waits
//! for anything — the gateway open, the tenant's own pause on the
//! resource (`limits::reports`), its room for one more hold, its key's
//! own limits.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sluice_admit::Ticket;
use tokio::time::Instant;

use super::{Acquire, Answer, Ask};
use crate::error::ApiError;
use crate::layers::Next;
use crate::layers::auth::Tenant;
use crate::layers::step::Step;
use crate::limits::holds::HoldError;
use crate::limits::resources::{scoped, unscoped};
use crate::request::Context;
use crate::state::AppState;

/// See the module doc.
pub(crate) enum Read {}

impl<S: Next<Ask, Answer>> Step<Acquire, S> for Read {
    type Response = Answer;

    async fn serve(state: AppState, inner: S, req: Acquire) -> Answer {
        let ask = read(&state, &req)?;
        inner.call(ask).await
    }
}

/// `req` read and checked.
fn read(state: &AppState, req: &Acquire) -> Result<Ask, ApiError> {
    let Acquire {
        tenant,
        headers,
        body,
        ..
    } = req;
    state.grace.check_open()?;
    let ctx = Context::from_headers(state, tenant, headers)?;
    let b: AcquireBody = crate::body::json(body)?;
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
    let max_wait = state.config.limits_api.max_wait_ms;
    let wait = b.timeout_ms.unwrap_or(0).min(max_wait);
    let deadline = (Instant::now() + Duration::from_millis(wait)).min(ctx.deadline);
    // The resource's lane of the admission queue, as the gateway's own
    // requests for it: one tenant cannot take every place in the
    // limiter's queue, and waits its fair turn behind the others.
    let ticket = Ticket::new(ctx.workspace.clone(), deadline)
        .with_priority(priority)
        .with_lane(resource.as_str());
    Ok(Ask {
        state: state.clone(),
        owner: Arc::from(tenant.name()),
        resource,
        cost: b.cost,
        caller: caller.needs,
        waits: wait > 0,
        deadline,
        ticket: Some(ticket),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcquireBody {
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

/// What an acquire is about: exactly one of these.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) resource: &'a Option<String>,
    pub(crate) model: &'a Option<String>,
    pub(crate) tool: &'a Option<String>,
}

impl Target<'_> {
    /// The limiter resource, in `tenant`'s scope: a configured model or
    /// API the caller's key allows (`openai/…`, `api:{name}`, or a tool
    /// classified as one), that model's or API's `tokens:` or `inflight:`
    /// resource, or the caller's own session (`session:x` is the tenant's
    /// session `x`). Nothing else: not another tenant's session or job
    /// group, not the queues' resources, not per-key limits. Every name is
    /// bounded ([`crate::names::check`]) before anything is looked up.
    pub(crate) fn resolve(&self, state: &AppState, tenant: &Tenant) -> Result<String, ApiError> {
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

/// A hold refused or unknown, as an answer.
pub(crate) fn hold_error(e: HoldError) -> ApiError {
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
