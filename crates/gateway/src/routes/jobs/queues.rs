//! Queue-wide calls: counts by state, pause and resume, and the dead
//! letters of a queue (retry all, purge). They touch every tenant's jobs,
//! so they are the operator's: the admin token, in every mode (without
//! one configured they are refused).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_jobs::{JobState, JobStore, QueueCounts, StateCounts};

use super::{notify, store, store_error};
use crate::audit::{ADMIN, Act};
use crate::error::ApiError;
use crate::layers::auth::Admin;
use crate::state::AppState;

/// A configured queue, or 404.
fn configured<'a>(state: &AppState, queue: &'a str) -> Result<&'a str, ApiError> {
    if state.config.jobs.queues.contains_key(queue) {
        Ok(queue)
    } else {
        Err(ApiError::NotFound(format!(
            "unknown queue {queue:?} (queues are configured in [jobs.queues.<name>])"
        )))
    }
}

fn queue_json(q: &QueueCounts) -> Value {
    let counts: serde_json::Map<String, Value> = JobState::ALL
        .iter()
        .map(|s| (s.as_str().to_owned(), q.counts.get(*s).into()))
        .collect();
    json!({"queue": q.queue, "paused": q.paused, "counts": counts, "total": q.counts.total()})
}

/// `GET /v1/queues`: every configured queue (and any other holding jobs)
/// with its jobs by state and whether it is paused.
pub async fn list_queues(State(state): State<AppState>, _: Admin) -> Result<Response, ApiError> {
    let store = store(&state)?;
    let mut counts = store.counts().await.map_err(store_error)?;
    for name in state.config.jobs.queues.keys() {
        if !counts.iter().any(|q| &q.queue == name) {
            counts.push(QueueCounts {
                queue: name.clone(),
                paused: false,
                counts: StateCounts::default(),
            });
        }
    }
    counts.sort_by(|a, b| a.queue.cmp(&b.queue));
    let queues: Vec<Value> = counts.iter().map(queue_json).collect();
    Ok(axum::Json(json!({"queues": queues})).into_response())
}

/// `POST /v1/queues/{queue}/pause`: workers stop claiming from it; running
/// jobs go on.
pub async fn pause(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(queue): Path<String>,
) -> Result<(Act, Response), ApiError> {
    set_paused(state, act, queue, true).await
}

/// `POST /v1/queues/{queue}/resume`.
pub async fn resume(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(queue): Path<String>,
) -> Result<(Act, Response), ApiError> {
    set_paused(state, act, queue, false).await
}

async fn set_paused(
    state: AppState,
    act: Act,
    queue: String,
    paused: bool,
) -> Result<(Act, Response), ApiError> {
    let store = store(&state)?;
    let queue = configured(&state, &queue)?;
    if paused {
        store.pause(queue).await
    } else {
        store.resume(queue).await
    }
    .map_err(store_error)?;
    if !paused {
        notify(&state, queue);
    }
    let kind = if paused {
        "queue.pause"
    } else {
        "queue.resume"
    };
    state.observers.record(
        act.entry(ADMIN, kind, queue)
            .after(json!({"paused": paused})),
    );
    Ok((
        act,
        axum::Json(json!({"queue": queue, "paused": paused})).into_response(),
    ))
}

/// `POST /v1/queues/{queue}/dead/retry`: every dead job of the queue runs
/// again with its attempts reset; answers how many.
pub async fn dead_retry(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(queue): Path<String>,
) -> Result<(Act, Response), ApiError> {
    dead_letters(state, act, queue, false).await
}

/// `DELETE /v1/queues/{queue}/dead`: deletes the queue's dead jobs;
/// answers how many.
pub async fn dead_purge(
    State(state): State<AppState>,
    _: Admin,
    act: Act,
    Path(queue): Path<String>,
) -> Result<(Act, Response), ApiError> {
    dead_letters(state, act, queue, true).await
}

/// Retries or purges every dead job of `queue`.
async fn dead_letters(
    state: AppState,
    act: Act,
    queue: String,
    purge: bool,
) -> Result<(Act, Response), ApiError> {
    let store = store(&state)?;
    let queue = configured(&state, &queue)?;
    let answer = if purge {
        let n = store.purge_dead(Some(queue)).await.map_err(store_error)?;
        json!({"queue": queue, "purged": n})
    } else {
        let n = store.retry_dead(queue).await.map_err(store_error)?;
        notify(&state, queue);
        json!({"queue": queue, "retried": n})
    };
    let kind = if purge { "dead.purge" } else { "dead.retry" };
    state
        .observers
        .record(act.entry(ADMIN, kind, queue).after(answer.clone()));
    Ok((act, axum::Json(answer).into_response()))
}
