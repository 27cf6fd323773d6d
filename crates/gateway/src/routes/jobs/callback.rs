//! A job with a `callback_url` (`POST /v1/jobs`): stored as a flow whose
//! parent is a `callback` job (see `sluice_jobs_http::callback`) and whose
//! one child is the job, failures ignored, in one transaction. The
//! callback runs once the job ended (completed, dead or cancelled) and is
//! retried as a job of its own; the job shows it as its `parent`.

use serde_json::json;
use sluice_jobs::flow::{ChildFailure, NewFlow};
use sluice_jobs::{Enqueued, JobStore, NewJob};
use sluice_jobs_http::callback::CALLBACK_KIND;

use super::store_error;
use crate::error::ApiError;
use crate::jobs::AnyStore;
use crate::state::AppState;

/// Stores `job` with a callback to `url`: the job as [`Enqueued`] (with a
/// known idempotency key, the original job and `duplicate`).
///
/// # Errors
/// 400 naming `callback_url` (callbacks off, a URL not allowed, a job
/// with `run_at`); the store's errors.
pub(super) async fn enqueue(
    state: &AppState,
    store: &AnyStore,
    mut job: NewJob,
    url: &str,
) -> Result<Enqueued, ApiError> {
    let config = state
        .stores
        .jobs
        .as_ref()
        .and_then(|j| j.callbacks())
        .ok_or_else(|| {
            ApiError::bad_field(
                "callback_url",
                "callbacks are off: [jobs.callbacks] allow lists no URL",
            )
        })?;
    config
        .check(url)
        .map_err(|e| ApiError::bad_field(&e.field, e.message))?;
    if job.run_at.is_some() {
        return Err(ApiError::bad_field(
            "callback_url",
            "a job with a callback runs at once: leave out run_at",
        ));
    }
    let mut callback = NewJob::new(job.queue.clone(), CALLBACK_KIND, json!({"url": url}))
        .tenant(job.tenant.clone())
        .group(job.group.clone())
        .priority(job.priority)
        .max_attempts(state.config.jobs.callbacks.max_attempts);
    // The key stands for the pair: a replay finds the callback, then its job.
    if let Some(key) = job.idempotency_key.take() {
        callback = callback.idempotency_key(key);
    }
    if let Some(tp) = &job.traceparent {
        callback = callback.traceparent(tp.clone());
    }
    let flow = NewFlow::new(callback)
        .on_child_failure(ChildFailure::Ignore)
        .child(job);
    flow.validate().map_err(store_error)?;
    let stored = store.enqueue_flow(flow).await.map_err(store_error)?;
    match stored.as_slice() {
        [_, child] => Ok(Enqueued {
            job: child.clone(),
            duplicate: false,
        }),
        [parent] => {
            let children = store.children(parent.id).await.map_err(store_error)?;
            let child = children.into_iter().next().ok_or_else(|| {
                ApiError::Conflict(format!(
                    "the idempotency key names job {} which is not a callback",
                    parent.id
                ))
            })?;
            Ok(Enqueued {
                job: child,
                duplicate: true,
            })
        }
        other => Err(ApiError::Internal(format!(
            "a callback flow stored {} jobs, not 2",
            other.len()
        ))),
    }
}
