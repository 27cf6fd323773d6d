//! A streamed answer on its way to the client: chunk by chunk through the
//! adapter's reader (which reads the usage and may translate), ended in
//! the client's format when the upstream fails or the deadline passes.
//!
//! Everything the call holds lives in the stream's producer: a client
//! that goes away drops the body, which aborts the producer, which
//! cancels the upstream call, settles the tokens the stream used so far
//! and releases the grant and the pool slot.

use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use sluice_usage::Usage;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use crate::layers::observe;
use crate::layers::usage::{Delivery, Reserved};
use crate::ledger::{Draft, Handed};
use crate::providers::StreamReader;
use crate::state::AppState;
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
    /// The call's ledger record, handed over when the stream ends.
    pub ledger: Option<Pending>,
    /// What a stream cut before its end is charged for its input.
    pub prompt_estimate: u64,
    /// What its output is charged at, by the characters streamed.
    pub chars_per_token: u64,
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

    async fn run(self, d: Delivery, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) {
        let Delivery {
            response,
            reserved,
            pool,
            ..
        } = d;
        let _pool = pool;
        let Relay {
            reader,
            deadline,
            route,
            trace,
            writer,
            ledger,
            prompt_estimate,
            chars_per_token,
        } = self;
        let mut m = Metered {
            reader,
            reserved: Some(reserved),
            ledger,
            prompt_estimate,
            chars_per_token,
            whole: false,
        };
        let mut upstream = response.into_body().into_data_stream();
        let started = Instant::now();
        let mut outcome = "complete";
        loop {
            let next = tokio::time::timeout_at(deadline.max(Instant::now()), upstream.next()).await;
            match next {
                Ok(Some(Ok(chunk))) => {
                    let out = m.reader.feed(chunk);
                    if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
                        observe::disconnected(route);
                        outcome = "client_disconnected";
                        break;
                    }
                }
                Ok(Some(Err(e))) => {
                    // The client is told in the stream, in its format, and
                    // the stream ends cleanly after it: an SDK raises the
                    // error instead of a bare disconnect.
                    let message = format!("the upstream stream failed: {e}");
                    let event = m.reader.error_event("upstream_error", &message);
                    let _ = tx.send(Ok(event)).await;
                    outcome = "upstream_error";
                    break;
                }
                Ok(None) => {
                    m.whole = true;
                    let tail = m.reader.finish();
                    if !tail.is_empty() {
                        let _ = tx.send(Ok(tail)).await;
                    }
                    break;
                }
                Err(_) => {
                    let event = m.reader.error_event(
                        "deadline_exceeded",
                        "the request's deadline passed mid-stream",
                    );
                    let _ = tx.send(Ok(event)).await;
                    outcome = "deadline";
                    break;
                }
            }
        }
        let traced = trace.as_ref().is_some_and(|t| t.otel.is_some());
        let end = observe::StreamEnd {
            outcome,
            usage: m.reader.usage(),
            tool_calls: m.reader.tool_calls(),
            // Read only for the spans that show it.
            head: traced.then(|| m.reader.head()),
            handed: m.settle(traced),
        };
        drop(m);
        observe::stream_ended(writer.as_ref(), trace, started, end);
    }
}

/// A stream's reader and its reservation, settled however the stream
/// ends: a client that goes away aborts the producer mid-await, so this
/// is done on drop. A stream that ended whole settles at the usage it
/// reported (none reported: the estimate stands); one cut before its end
/// (upstream reset, deadline, client gone) at what it used so far, not at
/// its whole `max_tokens`.
struct Metered {
    reader: Box<dyn StreamReader>,
    reserved: Option<Reserved>,
    ledger: Option<Pending>,
    prompt_estimate: u64,
    chars_per_token: u64,
    whole: bool,
}

impl Drop for Metered {
    fn drop(&mut self) {
        let _ = self.settle(false);
    }
}

impl Metered {
    /// Settles the reservation and hands the ledger record over, once;
    /// how the record went, when there was one and it is `timed` (for
    /// the request's spans).
    fn settle(&mut self, timed: bool) -> Option<Handed> {
        let reserved = self.reserved.take()?;
        let used = if self.whole {
            self.reader.usage()
        } else {
            self.reader
                .used_so_far(self.prompt_estimate, self.chars_per_token)
        };
        reserved.settle(used);
        let p = self.ledger.take()?;
        let (reported, details) = if self.whole {
            (self.reader.usage(), self.reader.details())
        } else {
            (None, sluice_usage::Details::default())
        };
        let so_far = self
            .reader
            .used_so_far(self.prompt_estimate, self.chars_per_token)
            .map(|u| (u.prompt_tokens, u.completion_tokens));
        p.hand_over(reported, so_far, details, timed)
    }
}

/// A streamed call's ledger record, waiting for its stream's end.
pub(crate) struct Pending {
    pub draft: Draft,
    pub state: AppState,
    pub status: u16,
    pub queued: Duration,
    pub attempts: u32,
}

impl Pending {
    /// `details`: a whole stream's cached input and reasoning, as its
    /// final usage reported them (zeros for a cut stream, whose usage is
    /// estimated). `timed`: the hand-over is timed for the request's
    /// spans, and said.
    fn hand_over(
        mut self,
        reported: Option<Usage>,
        so_far: Option<(u64, u64)>,
        details: sluice_usage::Details,
        timed: bool,
    ) -> Option<Handed> {
        let ledger = self.state.ledger.get()?;
        self.draft
            .used(&self.state.prices, reported, so_far, details);
        let record = self.draft.finish(self.status, self.queued, self.attempts);
        if timed {
            return Some(ledger.submit_timed(record));
        }
        ledger.submit(record);
        None
    }
}
