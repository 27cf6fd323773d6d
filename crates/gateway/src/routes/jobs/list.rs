//! `GET /v1/jobs`: the caller's jobs, page by page, without their
//! payloads and results (`GET /v1/jobs/{id}` has them).

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_jobs::{JobId, JobState, JobStore, JobSummary, ListFilter, MAX_NAME_LEN, MAX_PAGE};

use super::{job_json, store, store_error};
use crate::error::ApiError;
use crate::jobs::AnyStore;
use crate::layers::auth::Tenant;
use crate::state::AppState;

/// What `GET /v1/jobs` was asked.
pub(super) struct ListQuery {
    pub(super) queue: Option<String>,
    /// Only the operator's listing takes a tenant.
    pub(super) tenant: Option<String>,
    pub(super) state: Option<JobState>,
    pub(super) after: Option<JobId>,
    pub(super) limit: usize,
}

/// The query of a listing; `any_tenant` (the operator's) also takes
/// `tenant`.
pub(super) fn list_query(raw: Option<&str>, any_tenant: bool) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery {
        queue: None,
        tenant: None,
        state: None,
        after: None,
        limit: 100,
    };
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        match name.as_ref() {
            "queue" => q.queue = bounded("queue", &value)?,
            "tenant" if any_tenant => q.tenant = bounded("tenant", &value)?,
            "state" if value.is_empty() => q.state = None,
            "state" => {
                let states: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                q.state = Some(value.parse().map_err(|_| {
                    ApiError::bad_field(
                        "state",
                        format!("unknown state {value:?}: one of {}", states.join(", ")),
                    )
                })?);
            }
            "cursor" if value.is_empty() => q.after = None,
            "cursor" => {
                q.after = Some(value.parse().map_err(|_| {
                    ApiError::bad_field(
                        "cursor",
                        format!(
                            "{value:?} is not a cursor: pass `next_cursor` of the previous page"
                        ),
                    )
                })?);
            }
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE as usize).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "limit",
                            format!("must be a whole number from 1 to {MAX_PAGE}, not {value:?}"),
                        )
                    })?;
            }
            other => {
                let known = if any_tenant {
                    "queue, state, tenant, limit, cursor"
                } else {
                    "queue, state, limit, cursor"
                };
                return Err(ApiError::bad_field(
                    other,
                    format!("unknown query parameter: use {known}"),
                ));
            }
        }
    }
    Ok(q)
}

/// A name filter: empty is none; longer than a name may be is refused.
fn bounded(field: &str, value: &str) -> Result<Option<String>, ApiError> {
    if value.len() > MAX_NAME_LEN {
        return Err(ApiError::bad_field(
            field,
            format!("longer than {MAX_NAME_LEN} bytes"),
        ));
    }
    Ok(Some(value.to_owned()).filter(|v| !v.is_empty()))
}

/// `GET /v1/jobs?queue=&state=&limit=&cursor=`: the caller's jobs in id
/// order, `next_cursor` set when more may follow.
pub async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    let q = list_query(raw.as_deref(), false)?;
    let (jobs, next) = tenant_page(store, tenant.name(), q).await?;
    let jobs: Vec<Value> = jobs.iter().map(job_json).collect();
    let next = next.map(|id| id.to_string());
    Ok(axum::Json(json!({"jobs": jobs, "next_cursor": next})).into_response())
}

/// Up to `q.limit` of `tenant`'s jobs after the cursor, and the cursor
/// that follows them (`None` on the last page). The store filters by
/// tenant in the query, by index: one read, however many jobs other
/// tenants have.
async fn tenant_page(
    store: &AnyStore,
    tenant: &str,
    q: ListQuery,
) -> Result<(Vec<JobSummary>, Option<JobId>), ApiError> {
    let filter = ListFilter {
        queue: q.queue,
        state: q.state,
        tenant: Some(tenant.to_owned()),
        after: q.after,
        limit: q.limit as u32,
    };
    let page = store.list(&filter).await.map_err(store_error)?;
    Ok((page.jobs, page.next))
}
