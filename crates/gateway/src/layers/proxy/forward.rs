//! Forward: a proxied call's upstream answer passed on as it comes, its
//! body streamed while the call keeps its grant and its pool slot; a
//! failed call's answer names the API.

use std::task::{Context as TaskContext, Poll};

use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;
use tower::{Layer, Service};

use super::Call;
use crate::layers::failure::Failure;
use crate::layers::upstream::{Answered, Upstream};
use crate::layers::{BoxFuture, Next, Reply, Req, Served, call};
use crate::response::pass_api_headers;

/// Wraps a stack in [`Forward`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForwardLayer;

impl<S> Layer<S> for ForwardLayer {
    type Service = Forward<S>;

    fn layer(&self, inner: S) -> Forward<S> {
        Forward { inner }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Forward<S> {
    inner: S,
}

impl<S> Service<Req<Call>> for Forward<S>
where
    S: Next<Req<Upstream>, Served<Answered, Failure>>,
{
    type Response = Served<Reply>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<Reply>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req<Call>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            let Req { call: c, notes } = req;
            let served = call(
                inner,
                Req {
                    call: c.upstream,
                    notes,
                },
            )
            .await;
            let mut notes = served.notes;
            // Nothing is shared between proxied duplicates: the admission
            // slot ends with the call.
            drop(notes.admission.take());
            let answered = match served.result {
                Ok(a) => a,
                Err(f) => {
                    notes.meta.attempts += f.attempts();
                    return Ok(Served::err(f.into_error(&c.api), notes));
                }
            };
            notes.meta.attempts += answered.attempts;
            notes.meta.queued = answered.waited;
            Ok(Served::ok(Reply::Stream(stream(answered)), notes))
        })
    }
}

/// The client's response: the upstream's status, the headers worth
/// passing on, and the body as it comes.
fn stream(a: Answered) -> Response {
    let status =
        StatusCode::from_u16(a.response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = pass_api_headers(a.response.headers());
    let (grant, pool) = (a.grant, a.pool);
    let body = a.response.into_body().into_data_stream().map(move |chunk| {
        // Held until the body is done (or the client leaves).
        let _ = (&grant, &pool);
        chunk.map_err(std::io::Error::other)
    });
    let mut res = Response::new(axum::body::Body::from_stream(body));
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    res
}
