//! The admin API of tenants and tiers managed at run time: create, list,
//! show, change, block, unblock and delete tenants; create, list and change tiers
//! (a tier's change applies to every tenant and key in it). The
//! operator's (admin token).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_keys::{Budget, Change, Limits, NewTenant, Update};

use super::keys::{Registry, ok, registry, store_error};
use crate::audit::{ADMIN, Act, snapshot};
use crate::body::ApiJson;
use crate::error::ApiError;
use crate::layers::auth::Admin;
use crate::state::AppState;

/// What an act answers: its request id with the answer.
type Acted = Result<(Act, Response), ApiError>;

/// `POST /v1/tenants` `{"name", "tier"?, "limits"?, "budgets"?, "tags"?}`: 201.
pub(crate) async fn create(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    r: Registry,
    ApiJson(new): ApiJson<NewTenant>,
) -> Acted {
    let t = r.store().create_tenant(&new).await.map_err(store_error)?;
    // A name looked up before it existed may be cached as absent.
    r.changed(Change::Tenant(t.name.clone())).await;
    state.observers.record(
        act.entry(ADMIN, "tenant.create", &t.name)
            .after(snapshot(&t)),
    );
    Ok((act, (StatusCode::CREATED, axum::Json(t)).into_response()))
}

/// The tenant `name` as it is before a change, when the audit trail
/// wants it.
async fn tenant_before(state: &AppState, name: &str) -> Result<Value, ApiError> {
    if !state.observers.audited() {
        return Ok(Value::Null);
    }
    let t = registry(state)?
        .store()
        .tenant(name)
        .await
        .map_err(store_error)?;
    Ok(snapshot(&t))
}

/// `GET /v1/tenants`: the tenants of the store (those of the config file
/// are in the config).
pub(crate) async fn list(_: Admin, r: Registry) -> Result<Response, ApiError> {
    let tenants = r.store().tenants().await.map_err(store_error)?;
    ok(&json!({"tenants": tenants}))
}

/// `GET /v1/tenants/{name}`.
pub(crate) async fn show(
    _: Admin,
    r: Registry,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let t = r.store().tenant(&name).await.map_err(store_error)?;
    ok(&t.ok_or_else(|| ApiError::NotFound(format!("no tenant {name:?}")))?)
}

/// `PATCH /v1/tenants/{name}` `{"tier"?, "limits"?, "budgets"?, "tags"?}`.
pub(crate) async fn update(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(name): Path<String>,
    r: Registry,
    ApiJson(u): ApiJson<Update>,
) -> Acted {
    let was = tenant_before(&state, &name).await?;
    let t = r
        .store()
        .update_tenant(&name, &u)
        .await
        .map_err(store_error)?;
    r.changed(Change::Tenant(name.clone())).await;
    state.observers.record(
        act.entry(ADMIN, "tenant.update", &name)
            .before(was)
            .after(snapshot(&t)),
    );
    Ok((act, ok(&t)?))
}

async fn set_blocked(state: &AppState, act: Act, name: String, blocked: bool) -> Acted {
    let r = registry(state)?;
    let was = tenant_before(state, &name).await?;
    let t = if blocked {
        r.store().block_tenant(&name).await
    } else {
        r.store().unblock_tenant(&name).await
    }
    .map_err(store_error)?;
    r.changed(Change::Tenant(name.clone())).await;
    tracing::info!(tenant = %t.name, state = t.state.as_str(), "tenant state changed");
    let kind = if blocked {
        "tenant.block"
    } else {
        "tenant.unblock"
    };
    state.observers.record(
        act.entry(ADMIN, kind, &name)
            .before(was)
            .after(snapshot(&t)),
    );
    Ok((act, ok(&t)?))
}

/// `POST /v1/tenants/{name}/block`: every key of it is refused.
pub(crate) async fn block(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(name): Path<String>,
) -> Acted {
    set_blocked(&state, act, name, true).await
}

/// `POST /v1/tenants/{name}/unblock`.
pub(crate) async fn unblock(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(name): Path<String>,
) -> Acted {
    set_blocked(&state, act, name, false).await
}

/// `DELETE /v1/tenants/{name}`: the tenant and every key of it, for
/// good (refused from now on on every replica). The usage ledger, the
/// request log and the audit trail keep their history of it; the name
/// may be created again, from nothing.
pub(crate) async fn delete(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(name): Path<String>,
    r: Registry,
) -> Acted {
    let (t, keys) = r.store().delete_tenant(&name).await.map_err(store_error)?;
    for k in &keys {
        r.changed(Change::Key(k.id.clone())).await;
    }
    r.changed(Change::Tenant(name.clone())).await;
    let ids: Vec<&str> = keys.iter().map(|k| k.id.as_str()).collect();
    tracing::info!(tenant = %t.name, keys = ids.len(), "tenant deleted");
    state.observers.record(
        act.entry(ADMIN, "tenant.delete", &name)
            .before(json!({"tenant": snapshot(&t), "keys": ids})),
    );
    Ok((act, ok(&json!({"deleted": t, "keys_deleted": ids}))?))
}

/// A tier to create.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewTier {
    name: String,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    budgets: Vec<Budget>,
}

/// A tier's new limits and/or budgets (each replaced whole).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TierUpdate {
    #[serde(default)]
    limits: Option<Limits>,
    #[serde(default)]
    budgets: Option<Vec<Budget>>,
}

/// `POST /v1/tiers` `{"name", "limits"?, "budgets"?}`: 201.
pub(crate) async fn create_tier(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    r: Registry,
    ApiJson(new): ApiJson<NewTier>,
) -> Acted {
    let t = r
        .store()
        .create_tier_with(&new.name, &new.limits, &new.budgets)
        .await
        .map_err(store_error)?;
    r.changed(Change::Tier(t.name.clone())).await;
    state
        .observers
        .record(act.entry(ADMIN, "tier.create", &t.name).after(snapshot(&t)));
    Ok((act, (StatusCode::CREATED, axum::Json(t)).into_response()))
}

/// `GET /v1/tiers`.
pub(crate) async fn list_tiers(_: Admin, r: Registry) -> Result<Response, ApiError> {
    let tiers = r.store().tiers().await.map_err(store_error)?;
    ok(&json!({"tiers": tiers}))
}

/// `PUT /v1/tiers/{name}` `{"limits"?, "budgets"?}`: replaces its limits
/// and/or its budgets; every member follows at once.
pub(crate) async fn update_tier(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(name): Path<String>,
    r: Registry,
    ApiJson(u): ApiJson<TierUpdate>,
) -> Acted {
    let was = if state.observers.audited() {
        snapshot(&r.store().tier(&name).await.map_err(store_error)?)
    } else {
        Value::Null
    };
    let t = r
        .store()
        .update_tier_with(&name, u.limits.as_ref(), u.budgets.as_deref())
        .await
        .map_err(store_error)?;
    r.changed(Change::Tier(name.clone())).await;
    state.observers.record(
        act.entry(ADMIN, "tier.update", &name)
            .before(was)
            .after(snapshot(&t)),
    );
    Ok((act, ok(&t)?))
}
