//! The HTTP surface.

pub mod jobs;
pub mod limits;
pub mod models;
pub mod ops;
pub mod proxy;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, delete, get, post, put};

use crate::error::ApiError;
use crate::state::AppState;

/// Every route.
pub fn router(state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    Router::new()
        .route("/v1/chat/completions", post(models::chat))
        .route("/v1/embeddings", post(models::embeddings))
        .route("/v1/responses", post(models::responses))
        .route("/v1/messages", post(models::messages))
        .route("/proxy/{api}/{*path}", any(proxy::proxy))
        .route("/v1/limits/acquire", post(limits::acquire))
        .route("/v1/limits/release", post(limits::release))
        .route("/v1/limits/report", post(limits::report))
        .route("/v1/limits", get(limits::list))
        .route("/v1/limits/{resource}", put(limits::set))
        .route("/v1/jobs", post(jobs::enqueue).get(jobs::list))
        .route("/v1/jobs/batch", post(jobs::enqueue_batch))
        .route("/v1/jobs/{id}", get(jobs::get_job))
        .route("/v1/jobs/{id}/retry", post(jobs::retry))
        .route("/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/v1/queues", get(jobs::list_queues))
        .route("/v1/queues/{queue}/pause", post(jobs::pause))
        .route("/v1/queues/{queue}/resume", post(jobs::resume))
        .route("/v1/queues/{queue}/dead/retry", post(jobs::dead_retry))
        .route("/v1/queues/{queue}/dead", delete(jobs::dead_purge))
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this route".into())
        })
        .layer(axum::middleware::from_fn_with_state(limit, ops::body_limit))
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}
