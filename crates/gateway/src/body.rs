//! [`Body`]: a request's body, read whole by the handler that needs it,
//! after the caller is known.
//!
//! Handlers take it last, after their owner's extractor, so an
//! unauthenticated caller never gets up to `max_body_bytes` buffered. The
//! read is bounded in size (413) and in time (`http.body_read_timeout_ms`,
//! 408): a client that sends its body a byte a minute cannot hold a task
//! and its buffer for long.

use std::time::Duration;

use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::ApiError;
use crate::state::AppState;

/// The whole request body.
#[derive(Debug, Clone, Default)]
pub struct Body(pub Bytes);

impl FromRequest<AppState> for Body {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let limit = state.config.max_body_bytes;
        let timeout = Duration::from_millis(state.config.http.body_read_timeout_ms);
        read(req, limit, timeout).await.map(Body)
    }
}

/// Reads `req`'s body: at most `limit` bytes, within `timeout`.
async fn read(req: Request, limit: usize, timeout: Duration) -> Result<Bytes, Response> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(closing(ApiError::PayloadTooLarge { limit }));
    }
    let body = Limited::new(req.into_body(), limit);
    match tokio::time::timeout(timeout, body.collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(closing(ApiError::PayloadTooLarge { limit }))
        }
        Ok(Err(e)) => Err(closing(ApiError::BadRequest {
            message: format!("reading the request body: {e}"),
            param: None,
        })),
        Err(_) => Err(closing(ApiError::BodyTimeout(timeout))),
    }
}

/// An error answered before the request body was read to its end. The
/// server closes such a connection (the rest of the body is still on it),
/// and says so: without `Connection: close` a client would put the
/// connection back in its pool and its next request would fail on it.
fn closing(e: ApiError) -> Response {
    let mut res = e.into_response();
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}
