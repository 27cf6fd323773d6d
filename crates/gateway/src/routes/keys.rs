//! The admin API of keys managed at run time: issue (the key is in the
//! answer once, never again), list, show, change, rotate with a grace
//! period, revoke, block and unblock. Tenants and tiers are in
//! [`super::tenants`]. All of it is the operator's (admin token).
//!
//! A change drops the cached key at once (see [`crate::keys`]), so the
//! next request with it sees the change.

use std::time::Duration;

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_keys::{Change, KeyRecord, NewKey, Update};

use crate::audit::{ADMIN, Act, snapshot};
use crate::body::{ApiJson, Body, json_or_default};
use crate::error::{ApiError, chain};
use crate::keys::KeyRegistry;
use crate::layers::auth::Admin;
use crate::state::{AppState, Stores};

/// A rotated key works this long beside its replacement unless the
/// request says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3_600);

/// The key store, taken before the body: 404 while `[keys]` is off.
#[derive(Debug, Clone)]
pub(crate) struct Registry(Arc<Stores>);

impl FromRequestParts<AppState> for Registry {
    type Rejection = ApiError;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        registry(state)?;
        Ok(Registry(state.stores.clone()))
    }
}

impl std::ops::Deref for Registry {
    type Target = KeyRegistry;

    fn deref(&self) -> &KeyRegistry {
        // Checked when it was extracted; the stores never change.
        self.0.keystore.as_ref().expect("a key store")
    }
}

/// The key store, or why the keys API is off.
pub(crate) fn registry(state: &AppState) -> Result<&KeyRegistry, ApiError> {
    state.stores.keystore.as_ref().ok_or_else(|| {
        ApiError::NotFound("keys managed at run time are disabled ([keys] enabled = false)".into())
    })
}

/// A store error as an answer.
pub(crate) fn store_error(e: sluice_keys::Error) -> ApiError {
    use sluice_keys::Error as E;
    match e {
        E::Invalid { field, reason } => ApiError::bad_field(&field, reason),
        E::NotFound { .. } => ApiError::NotFound(e.to_string()),
        E::Conflict { .. } | E::WrongState { .. } => ApiError::Conflict(e.to_string()),
        E::Database(_) => {
            tracing::warn!(error = %chain(&e), "key store");
            ApiError::Unavailable {
                message: format!("the key store is unavailable: {}", chain(&e)),
                retry_after: Some(Duration::from_secs(1)),
            }
        }
        other => ApiError::Internal(chain(&other)),
    }
}

pub(crate) fn ok(v: &impl serde::Serialize) -> Result<Response, ApiError> {
    Ok(axum::Json(v).into_response())
}

/// `POST /v1/keys` `{"tenant", "name"?, "tier"?, "limits"?, "tags"?}`:
/// 201 with the key (`key`, shown this once) and its record.
pub(crate) async fn issue(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    r: Registry,
    ApiJson(new): ApiJson<NewKey>,
) -> Result<(Act, Response), ApiError> {
    let issued = r.store().issue_key(&new).await.map_err(store_error)?;
    tracing::info!(key = %issued.record.id, tenant = %issued.record.tenant, "key issued");
    // The record, never the key itself.
    state.observers.record(
        act.entry(ADMIN, "key.issue", &issued.record.id)
            .after(snapshot(&issued.record)),
    );
    Ok((
        act,
        (StatusCode::CREATED, axum::Json(issued)).into_response(),
    ))
}

/// `GET /v1/keys[?tenant=NAME]`: keys without their secrets.
pub(crate) async fn list(
    _: Admin,
    r: Registry,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let mut tenant = None;
    for (name, value) in url::form_urlencoded::parse(q.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "tenant" => tenant = Some(value.into_owned()).filter(|t| !t.is_empty()),
            other => {
                return Err(ApiError::bad_field(
                    other,
                    "unknown query parameter (tenant is the only one)",
                ));
            }
        }
    }
    let keys = r
        .store()
        .keys(tenant.as_deref())
        .await
        .map_err(store_error)?;
    ok(&json!({"keys": keys}))
}

fn found(id: &str, k: Option<KeyRecord>) -> Result<KeyRecord, ApiError> {
    k.ok_or_else(|| ApiError::NotFound(format!("no key {id:?}")))
}

/// `GET /v1/keys/{id}`.
pub(crate) async fn show(
    _: Admin,
    r: Registry,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let k = r.store().key(&id).await;
    ok(&found(&id, k.map_err(store_error)?)?)
}

/// The key `id` as it is before a change, when the audit trail wants it.
async fn before(state: &AppState, r: &KeyRegistry, id: &str) -> Result<Value, ApiError> {
    if !state.observers.audited() {
        return Ok(Value::Null);
    }
    let k = r.store().key(id).await.map_err(store_error)?;
    Ok(snapshot(&k))
}

/// `PATCH /v1/keys/{id}` `{"tier"?, "limits"?, "tags"?}`.
pub(crate) async fn update(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
    r: Registry,
    ApiJson(u): ApiJson<Update>,
) -> Result<(Act, Response), ApiError> {
    let was = before(&state, &r, &id).await?;
    let k = r.store().update_key(&id, &u).await.map_err(store_error)?;
    r.changed(Change::Key(id.clone())).await;
    state.observers.record(
        act.entry(ADMIN, "key.update", &id)
            .before(was)
            .after(snapshot(&k)),
    );
    Ok((act, ok(&k)?))
}

/// What `POST /v1/keys/{id}/rotate` may say.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rotate {
    /// How long the old key keeps working (default 1 h, at most 30 days).
    grace_seconds: Option<u64>,
}

/// `POST /v1/keys/{id}/rotate` `{"grace_seconds"?}`: 201 with the new key
/// (shown this once) and `previous`, the old key's record.
pub(crate) async fn rotate(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
    r: Registry,
    Body(body): Body,
) -> Result<(Act, Response), ApiError> {
    let req: Rotate = json_or_default(&body)?;
    let grace = req.grace_seconds.map_or(DEFAULT_GRACE, Duration::from_secs);
    let (new, old) = r
        .store()
        .rotate_key(&id, grace)
        .await
        .map_err(store_error)?;
    r.changed(Change::Key(id.clone())).await;
    tracing::info!(old = %old.id, new = %new.record.id, ?grace, "key rotated");
    state.observers.record(
        act.entry(ADMIN, "key.rotate", &id)
            .before(snapshot(&old))
            .after(snapshot(&new.record)),
    );
    let mut body = serde_json::to_value(&new).map_err(|e| ApiError::Internal(e.to_string()))?;
    body["previous"] = serde_json::to_value(&old).unwrap_or_default();
    Ok((act, (StatusCode::CREATED, axum::Json(body)).into_response()))
}

/// What a state change does.
#[derive(Debug, Clone, Copy)]
enum Action {
    Revoke,
    Block,
    Unblock,
}

async fn set_state(
    state: &AppState,
    act: Act,
    id: String,
    action: Action,
) -> Result<(Act, Response), ApiError> {
    let r = registry(state)?;
    let was = before(state, r, &id).await?;
    let s = r.store();
    let k = match action {
        Action::Revoke => s.revoke_key(&id).await,
        Action::Block => s.block_key(&id).await,
        Action::Unblock => s.unblock_key(&id).await,
    }
    .map_err(store_error)?;
    r.changed(Change::Key(id.clone())).await;
    tracing::info!(key = %k.id, state = k.state.as_str(), "key state changed");
    let kind = match action {
        Action::Revoke => "key.revoke",
        Action::Block => "key.block",
        Action::Unblock => "key.unblock",
    };
    state
        .observers
        .record(act.entry(ADMIN, kind, &id).before(was).after(snapshot(&k)));
    Ok((act, ok(&k)?))
}

/// `POST /v1/keys/{id}/revoke`: refused from now on, for good.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    set_state(&state, act, id, Action::Revoke).await
}

/// `DELETE /v1/keys/{id}`: the key, whatever its state, for good
/// (refused from now on on every replica, gone from every list; the
/// ledger and audit trail keep its history).
pub(crate) async fn delete(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
    r: Registry,
) -> Result<(Act, Response), ApiError> {
    let k = r.store().delete_key(&id).await.map_err(store_error)?;
    r.changed(Change::Key(id.clone())).await;
    tracing::info!(key = %k.id, tenant = %k.tenant, "key deleted");
    state
        .observers
        .record(act.entry(ADMIN, "key.delete", &id).before(snapshot(&k)));
    Ok((act, ok(&json!({"deleted": k}))?))
}

/// `POST /v1/keys/{id}/block`: refused until unblocked.
pub(crate) async fn block(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    set_state(&state, act, id, Action::Block).await
}

/// `POST /v1/keys/{id}/unblock`.
pub(crate) async fn unblock(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    set_state(&state, act, id, Action::Unblock).await
}
