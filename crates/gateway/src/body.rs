//! [`Body`]: a request's body, read whole by the handler that needs it,
//! after the caller is known; [`ApiJson`], the same read as JSON.
//!
//! Handlers take it last, after their owner's extractor, so an
//! unauthenticated caller never gets up to `max_body_bytes` buffered. The
//! read is bounded in size (413) and in time (`http.body_read_timeout_ms`,
//! 408): a client that sends its body a byte a minute cannot hold a task
//! and its buffer for long.
//!
//! An answer given before the body was read to its end (a 401, a 413, a
//! 408) leaves the rest of the body on the connection, so the server
//! closes it and [`close_if_unread`] says so (the router's edge,
//! `routes/edge.rs`, calls it for every answer).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::HttpBody;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Frame, SizeHint};
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::error::ApiError;

/// The whole request body.
#[derive(Debug, Clone, Default)]
pub struct Body(pub Bytes);

impl<S> FromRequest<S> for Body
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let config = Arc::<Config>::from_ref(state);
        let (parts, body) = req.into_parts();
        read(&parts.headers, body, &config).await.map(Body)
    }
}

/// The request's headers and its whole body ([`Body`]), for a handler
/// that keeps both: the headers are moved out of the request, where
/// axum's `HeaderMap` extractor clones them (a map and its entries per
/// request).
#[derive(Debug, Clone, Default)]
pub struct HeadersAndBody(pub HeaderMap, pub Bytes);

impl<S> FromRequest<S> for HeadersAndBody
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let config = Arc::<Config>::from_ref(state);
        let (parts, body) = req.into_parts();
        let bytes = read(&parts.headers, body, &config).await?;
        Ok(HeadersAndBody(parts.headers, bytes))
    }
}

/// The most a [`SmallBody`] reads: a login's token and its JSON.
pub const SMALL_BODY_BYTES: usize = 4 * 1024;

/// The request's whole body, like [`Body`], but at most
/// [`SMALL_BODY_BYTES`]: for routes anyone may call (`/ui/login`), which
/// must not buffer megabytes for a caller nobody knows.
#[derive(Debug, Clone, Default)]
pub struct SmallBody(pub Bytes);

impl<S> FromRequest<S> for SmallBody
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let config = Arc::<Config>::from_ref(state);
        let (parts, body) = req.into_parts();
        let limit = SMALL_BODY_BYTES.min(config.max_body_bytes);
        read_at_most(&parts.headers, body, &config, limit)
            .await
            .map(SmallBody)
    }
}

/// The request's body ([`Body`]) read as the JSON value `T`: a body
/// that is not one is answered 400, naming the field ([`json`]).
#[derive(Debug, Clone, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let Body(body) = Body::from_request(req, state).await?;
        json(&body)
            .map(ApiJson)
            .map_err(IntoResponse::into_response)
    }
}

/// `body` as `T`; a field of the wrong type is named (serde's own
/// message says only "invalid type … at line 1 column 14").
///
/// # Errors
/// 400: not JSON, trailing bytes, or a field that does not read.
pub(crate) fn json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if field == "." || inner.is_syntax() || inner.is_eof() {
            invalid_json(inner)
        } else {
            ApiError::bad_field(&field, inner)
        }
    })?;
    // Trailing bytes after the value, as `serde_json::from_slice` refuses.
    de.end().map_err(invalid_json)?;
    Ok(value)
}

/// [`json`], but an empty body is `T::default()`.
///
/// # Errors
/// As [`json`].
pub(crate) fn json_or_default<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        json(body)
    }
}

fn invalid_json(e: serde_json::Error) -> ApiError {
    ApiError::BadRequest {
        message: format!("invalid JSON body: {e}"),
        param: None,
    }
}

/// Reads `body`, sent with `headers`: at most `max_body_bytes`, within
/// `http.body_read_timeout_ms`.
async fn read(
    headers: &HeaderMap,
    body: axum::body::Body,
    config: &Config,
) -> Result<Bytes, Response> {
    read_at_most(headers, body, config, config.max_body_bytes).await
}

/// [`read`] with a limit of its own.
async fn read_at_most(
    headers: &HeaderMap,
    body: axum::body::Body,
    config: &Config,
    limit: usize,
) -> Result<Bytes, Response> {
    let timeout = Duration::from_millis(config.http.body_read_timeout_ms);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit }.into_response());
    }
    let body = Limited::new(body, limit);
    // A body that came with its head (most do) arms no timer.
    match crate::ready::within(timeout, body.collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::PayloadTooLarge { limit }.into_response())
        }
        Ok(Err(e)) => Err(ApiError::BadRequest {
            message: format!("reading the request body: {e}"),
            param: None,
        }
        .into_response()),
        Err(_) => Err(ApiError::BodyTimeout(timeout).into_response()),
    }
}

/// `req` with its body watched: the flag given back turns true once the
/// body has been read to its end (at once for a request without one).
/// [`close_if_unread`] reads it when the answer is known.
pub(crate) fn watch<B>(req: axum::http::Request<B>) -> (Request, Arc<AtomicBool>)
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    let read = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| {
        if inner.is_end_stream() {
            read.store(true, Ordering::Relaxed);
        }
        axum::body::Body::new(Watched {
            inner,
            read: Arc::clone(&read),
        })
    });
    (req, read)
}

/// An answer given before the request's body was read to its end says
/// `Connection: close`. The server closes such a connection (the rest of
/// the body is still on it, and reading it would be reading for a caller
/// that was refused); without the header a client would put the
/// connection back in its pool and its next request would fail on it.
pub(crate) fn close_if_unread(read: &AtomicBool, res: &mut Response) {
    if !read.load(Ordering::Relaxed) {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// A request body that notes when it has been read to its end.
struct Watched<B> {
    inner: B,
    read: Arc<AtomicBool>,
}

impl<B> HttpBody for Watched<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Relaxed);
        }
        polled.map(|frame| frame.map(|f| f.map_err(axum::Error::new)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
