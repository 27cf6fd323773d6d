//! The jobs API: enqueue (one or a batch, deduplicated by
//! `Idempotency-Key`), read, list, retry and cancel jobs, all scoped to the
//! caller's tenant (another tenant's job is as absent as a missing one);
//! and the queue-wide calls (counts, pause, resume, dead letters), which
//! touch every tenant's jobs and so are the operator's (admin token).
//!
//! A 201 is sent only after the store committed: an accepted job is on disk.

mod browse;
mod callback;
mod events;
mod flows;
mod list;
mod page;
mod queues;
mod schedules;
mod spec;

use std::time::Duration;

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_jobs::{Enqueued, Job, JobId, JobStore};

pub(crate) use browse::{
    cancel as admin_cancel, get as admin_get, list as admin_list, retry as admin_retry,
};
pub(crate) use events::{events, events_all};
pub(crate) use flows::enqueue_flow;
pub use list::list;
pub(crate) use page::{asset as browser_asset, page as browser_page};
pub use queues::{dead_purge, dead_retry, list_queues, pause, resume};
pub(crate) use schedules::ScheduleSpec;
pub(crate) use schedules::{
    delete as delete_schedule, get as get_schedule, list as list_schedules, put as put_schedule,
};
pub(crate) use spec::{Batch, JobSpec};

use crate::audit::{ADMIN, Act};
use crate::body::{ApiJson, Body, json};
use crate::error::{ApiError, chain};
use crate::jobs::AnyStore;
use crate::layers::auth::Tenant;
use crate::state::{AppState, Stores};

/// The most jobs one batch may hold.
pub const MAX_BATCH: usize = 1_000;
/// The header that marks an answer as the original job of an idempotency key.
pub const REPLAY_HEADER: &str = "x-sluice-idempotent-replay";

/// The store, or why the jobs API is off.
fn store(state: &AppState) -> Result<&AnyStore, ApiError> {
    state
        .stores
        .jobs
        .as_ref()
        .map(crate::jobs::Jobs::store)
        .ok_or_else(|| {
            ApiError::NotFound("durable jobs are disabled ([jobs] enabled = false)".into())
        })
}

/// A store error as an answer.
pub(crate) fn store_error(e: sluice_jobs::Error) -> ApiError {
    use sluice_jobs::Error as E;
    match e {
        E::NotFound(id) => ApiError::NotFound(format!("job {id} not found")),
        E::InvalidTransition { .. } | E::LeaseLost(_) => ApiError::Conflict(e.to_string()),
        E::Invalid { field, reason } => ApiError::bad_field(field, reason),
        E::Database(_) => {
            tracing::warn!(error = %chain(&e), "job store");
            ApiError::Unavailable {
                message: format!("the job store is unavailable: {}", chain(&e)),
                retry_after: Some(Duration::from_secs(1)),
            }
        }
        other => ApiError::Internal(chain(&other)),
    }
}

/// The job store for a new job, taken before the body: 503 while the
/// gateway drains, 404 while `[jobs]` is off.
#[derive(Debug, Clone)]
pub(crate) struct OpenStore(Arc<Stores>);

impl FromRequestParts<AppState> for OpenStore {
    type Rejection = ApiError;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        state.grace.check_open()?;
        store(state)?;
        Ok(OpenStore(state.stores.clone()))
    }
}

impl std::ops::Deref for OpenStore {
    type Target = AnyStore;

    fn deref(&self) -> &AnyStore {
        // Checked when it was extracted; the stores never change.
        let jobs = self.0.jobs.as_ref().expect("a job store");
        jobs.store()
    }
}

/// A job (or a list's summary of one) as the API shows it.
fn job_json(job: &impl serde::Serialize) -> Value {
    serde_json::to_value(job).unwrap_or_else(|e| json!({"error": e.to_string()}))
}

/// Wakes the workers of `queue`.
/// The enqueuing request's trace, which the job's attempts continue.
fn enqueuer_trace(headers: &HeaderMap) -> Option<String> {
    crate::request::client_traceparent(headers).map(|tp| tp.to_string())
}

fn notify(state: &AppState, queue: &str) {
    if let Some(jobs) = state.stores.jobs.as_ref() {
        jobs.notify(queue);
    }
}

/// Counts what an enqueue did.
fn count(e: &Enqueued) {
    if e.job.idempotency_key.is_some() {
        crate::metrics::job_idempotency(e.duplicate);
    }
    if !e.duplicate {
        crate::metrics::job_enqueued(&e.job.queue, &e.job.kind);
    }
}

/// `POST /v1/jobs`: 201 with the stored job, or 200 with the original job
/// (and `x-sluice-idempotent-replay: true`) for a known `Idempotency-Key`.
pub(crate) async fn enqueue(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    store: OpenStore,
    ApiJson(mut spec): ApiJson<JobSpec>,
) -> Result<Response, ApiError> {
    let callback_url = spec.take_callback();
    let header_key = headers
        .get("idempotency-key")
        .map(|v| {
            v.to_str()
                .map(|s| s.trim().to_owned())
                .map_err(|_| ApiError::bad_header("idempotency-key", "not visible ASCII"))
        })
        .transpose()?
        .filter(|k| !k.is_empty());
    if let (Some(h), Some(b)) = (&header_key, spec.idempotency_key())
        && h != b
    {
        return Err(ApiError::bad_header(
            "idempotency-key",
            "differs from the body's `idempotency_key`",
        ));
    }
    let mut job = spec.into_job(&state, tenant.name(), "")?;
    if let Some(tp) = enqueuer_trace(&headers) {
        job = job.traceparent(tp);
    }
    if let Some(key) = header_key {
        job = job.idempotency_key(key);
        job.validate()
            .map_err(|_| ApiError::bad_header("idempotency-key", "must be 1 to 200 bytes"))?;
    }
    let done = match callback_url {
        Some(url) => callback::enqueue(&state, &store, job, &url).await?,
        None => store.enqueue(job).await.map_err(store_error)?,
    };
    count(&done);
    notify(&state, &done.job.queue);
    let status = if done.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut res = (status, axum::Json(job_json(&done.job))).into_response();
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("/v1/jobs/{}", done.job.id)) {
        h.insert(header::LOCATION, v);
    }
    if done.duplicate {
        h.insert(REPLAY_HEADER, HeaderValue::from_static("true"));
    }
    Ok(res)
}

/// `POST /v1/jobs/batch`: `{"jobs":[…]}`, all stored or none. 201 with the
/// jobs in order, each marked `idempotent_replay` if it was an earlier job.
pub(crate) async fn enqueue_batch(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    store: OpenStore,
    Body(body): Body,
) -> Result<Response, ApiError> {
    if headers.contains_key("idempotency-key") {
        // One key cannot stand for many jobs; refuse rather than ignore it.
        return Err(ApiError::bad_header(
            "idempotency-key",
            "a batch takes one `idempotency_key` per job, not the header",
        ));
    }
    let batch: Batch = json(&body)?;
    let specs = batch
        .jobs
        .ok_or_else(|| ApiError::bad_field("jobs", "is required"))?;
    if specs.is_empty() {
        return Err(ApiError::bad_field("jobs", "must hold at least one job"));
    }
    if specs.len() > MAX_BATCH {
        return Err(ApiError::bad_field(
            "jobs",
            format!("holds {} jobs; at most {MAX_BATCH} per batch", specs.len()),
        ));
    }
    // Every job is checked before any is stored: one bad job
    // refuses the batch, naming its index.
    let jobs = specs
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.into_job(&state, tenant.name(), &format!("jobs[{i}].")))
        .map(|job| match enqueuer_trace(&headers) {
            Some(tp) => job.map(|j| j.traceparent(tp)),
            None => job,
        })
        .collect::<Result<Vec<_>, _>>()?;
    let done = store.enqueue_batch(jobs).await.map_err(store_error)?;
    let mut queues: Vec<&str> = done.iter().map(|e| e.job.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        notify(&state, queue);
    }
    let jobs: Vec<Value> = done
        .iter()
        .map(|e| {
            count(e);
            let mut v = job_json(&e.job);
            v["idempotent_replay"] = e.duplicate.into();
            v
        })
        .collect();
    Ok((StatusCode::CREATED, axum::Json(json!({"jobs": jobs}))).into_response())
}

fn job_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_field("id", format!("{raw:?} is not a job id (an integer)")))
}

/// Who acts on a job: a tenant on its own, or the operator on any.
#[derive(Clone, Copy)]
enum Who<'a> {
    Tenant(&'a Tenant),
    Admin,
}

impl Who<'_> {
    /// The actor the audit trail names.
    fn actor(self) -> String {
        match self {
            Who::Tenant(t) => t.actor(),
            Who::Admin => ADMIN.to_owned(),
        }
    }
}

/// The caller's job `id`: another tenant's job is as absent as a missing
/// one; the operator's is any job.
async fn owned(store: &AnyStore, who: Who<'_>, id: JobId) -> Result<Job, ApiError> {
    match (store.get(id).await.map_err(store_error)?, who) {
        (Some(job), Who::Admin) => Ok(job),
        (Some(job), Who::Tenant(tenant)) if job.tenant == tenant.name() => Ok(job),
        _ => Err(ApiError::NotFound(format!("job {id} not found"))),
    }
}

/// What a call does to one of the caller's jobs.
#[derive(Clone, Copy)]
enum JobCall {
    Read,
    Retry,
    Cancel,
}

/// `GET /v1/jobs/{id}`.
pub async fn get_job(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    call(&state, Who::Tenant(&tenant), None, &id, JobCall::Read).await
}

/// `POST /v1/jobs/{id}/retry`: a dead job runs again (409 otherwise).
pub async fn retry(
    State(state): State<AppState>,
    tenant: Tenant,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    let answer = call(
        &state,
        Who::Tenant(&tenant),
        Some(&act),
        &id,
        JobCall::Retry,
    )
    .await?;
    Ok((act, answer))
}

/// `POST /v1/jobs/{id}/cancel`: a job that has not finished never runs
/// (again); 409 for a finished one.
pub async fn cancel(
    State(state): State<AppState>,
    tenant: Tenant,
    act: Act,
    Path(id): Path<String>,
) -> Result<(Act, Response), ApiError> {
    let answer = call(
        &state,
        Who::Tenant(&tenant),
        Some(&act),
        &id,
        JobCall::Cancel,
    )
    .await?;
    Ok((act, answer))
}

/// Finds the caller's job `id` (404 for another tenant's) and does `what`
/// (a change recorded in the audit trail as made in `act`).
async fn call(
    state: &AppState,
    who: Who<'_>,
    act: Option<&Act>,
    id: &str,
    what: JobCall,
) -> Result<Response, ApiError> {
    let store = store(state)?;
    let was = owned(store, who, job_id(id)?).await?;
    let (job, kind) = match what {
        JobCall::Read => {
            let mut body = job_json(&was);
            // A flow's parent shows its children, with their results.
            if was.on_child_failure.is_some() {
                let children = store.children(was.id).await.map_err(store_error)?;
                body["children"] = children
                    .iter()
                    .map(|c| json!({"id": c.id, "state": c.state, "result": c.result}))
                    .collect();
            }
            // The operator's browser shows how the job got where it is.
            if matches!(who, Who::Admin) {
                let events = store
                    .timeline(was.id, browse::TIMELINE)
                    .await
                    .map_err(store_error)?;
                body["timeline"] = serde_json::to_value(events).unwrap_or_default();
            }
            return Ok(axum::Json(body).into_response());
        }
        JobCall::Retry => {
            let job = store.retry(was.id).await.map_err(store_error)?;
            notify(state, &job.queue);
            (job, "job.retry")
        }
        JobCall::Cancel => (
            store.cancel(was.id).await.map_err(store_error)?,
            "job.cancel",
        ),
    };
    if let Some(act) = act {
        state.observers.record(
            act.entry(&who.actor(), kind, &job.id.to_string())
                .before(job_summary(&was))
                .after(job_summary(&job)),
        );
    }
    Ok(axum::Json(job_json(&job)).into_response())
}

/// What the audit trail keeps of a job: where it is, not its payload.
fn job_summary(job: &Job) -> Value {
    json!({
        "queue": job.queue,
        "kind": job.kind,
        "tenant": job.tenant,
        "state": job.state.as_str(),
        "attempts": job.attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_jobs::JobState;

    #[test]
    fn store_errors_map_to_their_statuses() {
        let status = |e| store_error(e).status().as_u16();
        let down = sluice_jobs::Error::Database(sqlx_pool_timeout());
        let unavailable = store_error(sluice_jobs::Error::Database(sqlx_pool_timeout()));
        assert!(
            unavailable.to_string().contains("job store is unavailable"),
            "{unavailable}"
        );
        assert_eq!(status(down), 503);
        assert_eq!(status(sluice_jobs::Error::NotFound(JobId(7))), 404);
        let conflict = sluice_jobs::Error::InvalidTransition {
            id: JobId(7),
            state: JobState::Completed,
            action: "retry",
        };
        assert_eq!(status(conflict), 409);
        assert_eq!(status(sluice_jobs::Error::LeaseLost(JobId(7))), 409);
        let invalid = store_error(sluice_jobs::Error::Invalid {
            field: "queue",
            reason: "must not be empty",
        });
        assert_eq!(
            (
                invalid.status().as_u16(),
                invalid.body()["error"]["param"].as_str()
            ),
            (400, Some("queue"))
        );
    }

    fn sqlx_pool_timeout() -> sqlx::Error {
        sqlx::Error::PoolTimedOut
    }
}
