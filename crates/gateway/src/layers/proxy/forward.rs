//! Forward: a proxied call's upstream answer passed on as it comes, its
//! body streamed while the call keeps its grant and its pool slot; a
//! failed call's answer names the API.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;

use super::Call;
use crate::layers::failure::Failure;
use crate::layers::step::{Step, StepLayer};
use crate::layers::upstream::{Answered, Upstream};
use crate::layers::{Next, Reply, Req, Served, call};
use crate::response::pass_api_headers;
use crate::state::AppState;

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
        Served::ok(Reply::Stream(stream(answered)), notes)
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
