//! `DELETE /v1/cache` (the operator empties the response cache, by tenant,
//! model or key prefix), `GET /v1/cache/stats` (the operator sees it all)
//! and `GET /v1/cache/stats/tenant` (a tenant sees its own counters).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::audit::{ADMIN, Act};
use crate::error::ApiError;
use crate::layers::auth::{Admin, Tenant};
use crate::state::AppState;

/// `DELETE /v1/cache?tenant=…&model=…&key_prefix=…`: removes the entries
/// matching every parameter given (all of them with none), from the
/// shared store and every session, and says how many.
pub async fn invalidate(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Result<(Act, Response), ApiError> {
    let Ok(Query(query)) = query else {
        return Err(ApiError::BadRequest {
            message: "the query string is not `name=value` pairs".into(),
            param: None,
        });
    };
    let filter = crate::cache::filter(&state.config, &query)?;
    let removed = state.spend.cache.invalidate(&filter).await;
    // What was asked for, in a stable order.
    let asked: std::collections::BTreeMap<_, _> = query.iter().collect();
    state.observers.record(
        act.entry(ADMIN, "cache.purge", "cache")
            .after(json!({"filter": asked, "removed": removed})),
    );
    Ok((act, Json(json!({"removed": removed})).into_response()))
}

/// `GET /v1/cache/stats`: the whole cache's counters and size.
pub async fn stats(State(state): State<AppState>, _: Admin) -> Response {
    let stats = state.spend.cache.stats().await;
    Json(json!({"scope": "all", "stats": stats})).into_response()
}

/// `GET /v1/cache/stats/tenant`: the calling tenant's own counters.
pub async fn tenant_stats(State(state): State<AppState>, tenant: Tenant) -> Response {
    let own = state.spend.cache_tenants.of(tenant.name());
    Json(json!({"scope": "tenant", "tenant": tenant.name(), "stats": own})).into_response()
}
