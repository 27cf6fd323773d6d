//! The operator's view of every tenant's jobs, which the job browser at
//! `/ui/jobs` reads and acts through: `GET /v1/jobs/all` (any tenant's,
//! filtered by queue, state and tenant), `GET /v1/jobs/all/{id}` (with
//! payload, result and timeline), and retry and cancel of any job, each
//! recorded in the audit trail as the admin's.

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_jobs::{JobStore, ListFilter};

use super::list::list_query;
use super::{JobCall, Who, call, job_json, store, store_error};
use crate::audit::Act;
use crate::error::ApiError;
use crate::layers::auth::Admin;
use crate::state::AppState;

/// The most events of one job `GET /v1/jobs/all/{id}` shows.
pub(super) const TIMELINE: u32 = 200;

/// `GET /v1/jobs/all?queue=&state=&tenant=&limit=&cursor=`: every
/// tenant's jobs in id order, without payloads, `next_cursor` set when
/// more may follow.
pub async fn list(
    State(state): State<AppState>,
    _: Admin,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    let q = list_query(raw.as_deref(), true)?;
    let filter = ListFilter {
        queue: q.queue,
        state: q.state,
        tenant: q.tenant,
        after: q.after,
        limit: q.limit as u32,
    };
    let page = store.list(&filter).await.map_err(store_error)?;
    let jobs: Vec<Value> = page.jobs.iter().map(job_json).collect();
    let next = page.next.map(|id| id.to_string());
    Ok(axum::Json(json!({"jobs": jobs, "next_cursor": next})).into_response())
}

/// `GET /v1/jobs/all/{id}`: any tenant's job, with its children (a flow's
/// parent) and its `timeline` (its events while they are kept, oldest
/// first, at most [`TIMELINE`]).
pub async fn get(
    State(state): State<AppState>,
    _: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    call(&state, Who::Admin, None, &id, JobCall::Read).await
}

/// `POST /v1/jobs/all/{id}/retry`: any tenant's dead job runs again
/// (409 otherwise); audited as `job.retry` by `admin`.
pub async fn retry(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    let answer = call(&state, Who::Admin, Some(&act), &id, JobCall::Retry).await?;
    Ok((act, answer))
}

/// `POST /v1/jobs/all/{id}/cancel`: any tenant's unfinished job never
/// runs (again) (409 for a finished one); audited as `job.cancel` by
/// `admin`.
pub async fn cancel(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    let answer = call(&state, Who::Admin, Some(&act), &id, JobCall::Cancel).await?;
    Ok((act, answer))
}
