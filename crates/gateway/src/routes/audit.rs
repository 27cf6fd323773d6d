//! `GET /v1/audit`: the audit trail, newest first (the operator's).
//!
//! `from` and `to` are RFC 3339 times or milliseconds since the Unix
//! epoch (`from` included, `to` not); `actor` is exact (`admin`,
//! `key:{id}`, `tenant:{name}`, `upstream`, `bus:{replica}`); `kind` is
//! exact or a prefix up to a dot (`key` selects `key.revoke`, …); `limit`
//! is 1 to 1,000 (default 100); `before` (an entry's id) pages on: the
//! answer's `next_before` is the value for the next page, absent on the
//! last.

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};
use sluice_audit::Filter;

use crate::audit::query::{entry_json, filter};
use crate::error::{ApiError, chain};
use crate::layers::auth::Admin;
use crate::state::AppState;

/// `GET /v1/audit?from=&to=&actor=&kind=&limit=&before=`.
pub async fn list(
    State(state): State<AppState>,
    _: Admin,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let audit = state.observers.audit.as_ref().ok_or_else(|| {
        ApiError::NotFound("the audit trail is disabled ([audit] enabled = false)".into())
    })?;
    let f = filter(q.as_deref().unwrap_or_default())?;
    let entries = audit.store().query(&f).await.map_err(|e| {
        tracing::warn!(error = %chain(&e), "audit store");
        ApiError::Unavailable {
            message: format!("the audit store is unavailable: {}", chain(&e)),
            retry_after: Some(std::time::Duration::from_secs(1)),
        }
    })?;
    let full = entries.len() == f.limit.clamp(1, Filter::MAX_LIMIT) as usize;
    let mut body = json!({"entries": entries.iter().map(entry_json).collect::<Vec<_>>()});
    if full && let Some(last) = entries.last() {
        body["next_before"] = last.id.into();
    }
    Ok(Json(body))
}
