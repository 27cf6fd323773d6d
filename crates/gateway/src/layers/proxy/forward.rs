//! Forward: a proxied call's upstream answer passed on as it comes, its
//! body streamed while the call keeps its grant and its pool slot, until
//! the request's deadline at the latest (kept by a watchdog, whether or
//! not the client reads: [`crate::watchdog`]); a failed call's answer
//! names the API.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::Frame;
use sluice_admit::BulkheadPermit;
use sluice_limit::Permit;
use tokio::time::Instant;

use super::Call;
use crate::layers::failure::Failure;
use crate::layers::step::{Step, StepLayer};
use crate::layers::upstream::{Answered, Upstream};
use crate::layers::{Next, Reply, Req, Served, call};
use crate::response::pass_api_headers;
use crate::state::AppState;
use crate::watchdog::{self, Expire};

/// Wraps a stack in [`Forward`].
pub(crate) type ForwardLayer = StepLayer<Forward>;

/// See the module doc.
pub(crate) enum Forward {}

impl<S> Step<Req<Call>, S> for Forward
where
    S: Next<Req<Arc<Upstream>>, Served<Answered, Failure>>,
{
    type Response = Served<Reply>;

    async fn serve(_: AppState, inner: S, req: Req<Call>) -> Served<Reply> {
        let Req { call: c, notes } = req;
        let deadline = c.upstream.deadline;
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
                return Served::err(f.into_error(&c.api), notes);
            }
        };
        notes.meta.attempts += answered.attempts;
        notes.meta.queued = answered.waited;
        Served::ok(Reply::Stream(stream(answered, deadline)), notes)
    }
}

/// The client's response: the upstream's status, the headers worth
/// passing on, and the body as it comes, until `deadline`.
fn stream(a: Answered, deadline: Instant) -> Response {
    let status =
        StatusCode::from_u16(a.response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = pass_api_headers(a.response.headers());
    let body = Forwarded {
        upstream: a.response.into_body(),
        _grant: a.grant,
        _pool: a.pool,
    };
    let mut res = Response::new(Body::new(watchdog::watched(body, deadline)));
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    res
}

/// A proxied answer's body, holding the call's grant and pool slot until
/// it is done, the client leaves, or its deadline passes.
struct Forwarded {
    upstream: Body,
    _grant: Permit,
    _pool: BulkheadPermit,
}

impl HttpBody for Forwarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.upstream).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.upstream.is_end_stream()
    }
}

impl Expire for Forwarded {
    /// An API's body has no error event: it is broken off, so that the
    /// client does not take what came for the whole of it.
    fn expire(&mut self) -> Result<Bytes, axum::Error> {
        Err(axum::Error::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the request's deadline passed before the API's body ended",
        )))
    }
}
