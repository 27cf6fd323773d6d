//! A streamed answer on its way to the client: chunk by chunk through the
//! adapter's reader (which reads the usage and may translate), ended in
//! the client's format when the upstream fails or the deadline passes.
//!
//! Everything the call holds lives in the stream's producer: a client
//! that goes away drops the body, which aborts the producer, which
//! cancels the upstream call and releases the grant and the pool slot.

use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use crate::layers::observe;
use crate::layers::usage::Delivery;
use crate::providers::StreamReader;
use crate::trace::{Trace, TraceWriter};

/// What relaying a stream needs besides the answer.
pub(super) struct Relay {
    /// The adapter's reader of this stream.
    pub reader: Box<dyn StreamReader>,
    /// The request's deadline: the stream ends there.
    pub deadline: Instant,
    /// The route, for the disconnect metric.
    pub route: &'static str,
    /// The request's trace, finished when the stream ends.
    pub trace: Option<Trace>,
    pub writer: Option<TraceWriter>,
}

impl Relay {
    /// The client's response body, fed from `d`'s upstream stream by a
    /// task that runs as the client reads.
    pub(super) fn start(self, d: Delivery) -> Response {
        let (tx, rx) = mpsc::channel(1);
        let producer = AbortOnDropHandle::new(tokio::spawn(self.run(d, tx)));
        let body = futures_util::stream::unfold((rx, producer), |(mut rx, producer)| async move {
            rx.recv().await.map(|item| (item, (rx, producer)))
        });
        Response::new(axum::body::Body::from_stream(body))
    }

    async fn run(mut self, d: Delivery, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) {
        let Delivery {
            response,
            reserved,
            pool,
            ..
        } = d;
        let _pool = pool;
        let mut upstream = response.bytes_stream();
        let started = Instant::now();
        let mut outcome = "complete";
        loop {
            let next =
                tokio::time::timeout_at(self.deadline.max(Instant::now()), upstream.next()).await;
            match next {
                Ok(Some(Ok(chunk))) => {
                    let out = self.reader.feed(chunk);
                    if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
                        observe::disconnected(self.route);
                        outcome = "client_disconnected";
                        break;
                    }
                }
                Ok(Some(Err(e))) => {
                    // The client is told in the stream, in its format, and
                    // the stream ends cleanly after it: an SDK raises the
                    // error instead of a bare disconnect.
                    let message = format!("the upstream stream failed: {e}");
                    let event = self.reader.error_event("upstream_error", &message);
                    let _ = tx.send(Ok(event)).await;
                    outcome = "upstream_error";
                    break;
                }
                Ok(None) => {
                    let tail = self.reader.finish();
                    if !tail.is_empty() {
                        let _ = tx.send(Ok(tail)).await;
                    }
                    break;
                }
                Err(_) => {
                    let event = self.reader.error_event(
                        "deadline_exceeded",
                        "the request's deadline passed mid-stream",
                    );
                    let _ = tx.send(Ok(event)).await;
                    outcome = "deadline";
                    break;
                }
            }
        }
        let used = self.reader.usage();
        reserved.settle(used);
        observe::stream_ended(
            self.writer.as_ref(),
            self.trace.take(),
            started,
            outcome,
            used,
            self.reader.tool_calls(),
        );
    }
}
