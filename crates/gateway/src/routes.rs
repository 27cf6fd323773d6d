//! The HTTP surface.

pub mod limits;
pub mod models;
pub mod ops;
pub mod proxy;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post, put};

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
