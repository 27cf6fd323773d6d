//! A streamed answer on its way to the client: chunk by chunk through the
//! adapter's reader (which reads the usage and may translate), ended in
//! the client's format when the upstream fails, the deadline passes or
//! the shutdown grace ends (an error event in its format, then a clean
//! end, rather than a connection cut mid-stream).
//!
//! Everything the call holds lives in the client's body: a client that
//! goes away drops the body, which cancels the upstream call, settles
//! the tokens the stream used so far and releases the grant and the pool
//! slot. So does the request's deadline, kept by a watchdog outside the
//! body ([`crate::watchdog`]): a client that stops reading leaves the
//! body unpolled, and cannot hold any of it past the deadline.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::HttpBody;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use hyper::body::Frame;
use sluice_admit::BulkheadPermit;
use sluice_usage::Usage;
use tokio::time::Instant;

use crate::access;
use crate::layers::observe;
use crate::layers::usage::{Delivery, Reserved, bounded};
use crate::ledger::{Draft, Handed};
use crate::providers::StreamReader;
use crate::state::AppState;
use crate::trace::{Trace, TraceWriter};
use crate::watchdog;

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
    /// The output tokens reserved for it: a stream without its final
    /// usage is charged at least `cut_share` of them.
    pub completion_reserved: u64,
    /// `tokens.cut_stream_share`.
    pub cut_share: f64,
    /// What its output is charged at, by the characters streamed.
    pub chars_per_token: u64,
    /// Resolves when the shutdown grace ends ([`Grace::over_owned`](crate::state::Grace::over_owned)).
    pub grace_over: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The most the call could use, whatever the stream reports.
    pub bound: Bound,
}

/// The most a streamed call could use, and whose it is (for the flag
/// when its reported usage is above).
pub(super) struct Bound {
    pub ceiling: sluice_usage::UsageCeiling,
    pub provider: String,
    pub model: String,
}

impl Relay {
    /// The client's response body, fed from `d`'s upstream stream as the
    /// client reads it.
    pub(super) fn start(self, d: Delivery) -> Response {
        let Delivery {
            response,
            reserved,
            pool,
            ..
        } = d;
        let Relay {
            reader,
            deadline,
            route,
            trace,
            writer,
            ledger,
            prompt_estimate,
            completion_reserved,
            cut_share,
            chars_per_token,
            grace_over,
            bound,
        } = self;
        let body = RelayBody {
            upstream: response.into_body(),
            grace_over,
            metered: Metered {
                reader,
                reserved: Some(reserved),
                ledger,
                prompt_estimate,
                completion_reserved,
                cut_share,
                chars_per_token,
                whole: false,
                call: None,
                bound,
            },
            ending: Some(Ending {
                route,
                trace,
                writer,
                started: Instant::now(),
            }),
            _pool: pool,
            held: BytesMut::new(),
            idle_polls: 0,
        };
        let mut res = Response::new(axum::body::Body::new(watchdog::watched(body, deadline)));
        if access::on() {
            // Its tokens are known at its end: its line is written then.
            res.extensions_mut().insert(access::Later);
        }
        res
    }
}

/// The client's body: each poll reads the upstream body in place, with
/// no task or channel between the two connections, so a chunk costs one
/// hand-over (hyper's client connection to the server's) instead of
/// three. The deadline is one timer for the whole stream, in its
/// watchdog. Chunks that the upstream's connection has already read go
/// out together (see `poll_frame`).
struct RelayBody {
    upstream: axum::body::Body,
    /// The end of the shutdown grace: the stream ends there too (the
    /// deadline is the watchdog's).
    grace_over: Pin<Box<dyn Future<Output = ()> + Send>>,
    metered: Metered,
    /// Taken when the stream ends; still there on drop means the client
    /// went away first.
    ending: Option<Ending>,
    /// The pool slot, held until the stream ends or the client leaves.
    _pool: BulkheadPermit,
    /// Bytes read from the upstream that go out in the next frame.
    held: BytesMut,
    /// Polls in a row, while bytes are held, that brought nothing new.
    idle_polls: u8,
}

/// The most a frame holds before it goes out, when the upstream hands
/// over chunks faster than they are written.
const HOLD_AT_MOST: usize = 16 * 1024;

/// What the end of the stream reports to.
struct Ending {
    /// The route, for the disconnect metric.
    route: &'static str,
    trace: Option<Trace>,
    writer: Option<TraceWriter>,
    started: Instant,
}

impl RelayBody {
    /// Settles the stream and finishes its trace with `outcome`, once.
    fn end(&mut self, outcome: &'static str) {
        let Some(e) = self.ending.take() else {
            return;
        };
        let m = &mut self.metered;
        let traced = e.trace.as_ref().is_some_and(|t| t.otel.is_some());
        let end = observe::StreamEnd {
            outcome,
            usage: m.reader.usage(),
            tool_calls: m.reader.tool_calls(),
            // Read only for the spans that show it.
            head: traced.then(|| m.reader.head()),
            handed: m.settle(traced),
        };
        let call = m.call.take();
        if access::on() {
            logged(e.route, e.started, e.trace.as_ref(), call);
        }
        observe::stream_ended(e.writer.as_ref(), e.trace, e.started, end);
    }

    /// Ends the stream with `outcome`; returns the reader's error event.
    fn fail(&mut self, outcome: &'static str, code: &str, message: &str) -> Bytes {
        let event = self.metered.reader.error_event(code, message);
        // The request log keeps what the client gets (the frame goes out
        // after the record is settled).
        if let Some(p) = self.metered.ledger.as_mut() {
            p.draft.streamed(&self.held);
            p.draft.streamed(&event);
        }
        self.end(outcome);
        event
    }

    /// What is held, then `last`, as the next frame.
    fn release(&mut self, last: Bytes) -> Bytes {
        let out = self.frame(last);
        // The request log keeps what the client received (when it keeps
        // bodies), up to its cap.
        if let Some(p) = self.metered.ledger.as_mut() {
            p.draft.streamed(&out);
        }
        out
    }

    fn frame(&mut self, last: Bytes) -> Bytes {
        if self.held.is_empty() {
            return last;
        }
        self.held.extend_from_slice(&last);
        self.held.split().freeze()
    }
}

impl HttpBody for RelayBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.ending.is_none() {
            return Poll::Ready(None);
        }
        // Whether this poll took bytes from the upstream.
        let mut took = false;
        loop {
            if this.held.len() >= HOLD_AT_MOST {
                return Poll::Ready(Some(Ok(Frame::data(this.release(Bytes::new())))));
            }
            match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers (none from a provider so far) are not passed on.
                    let Ok(chunk) = frame.into_data() else {
                        continue;
                    };
                    let out = this.metered.reader.feed(chunk);
                    if !out.is_empty() {
                        this.held.extend_from_slice(&out);
                        took = true;
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    // The client is told in the stream, in its format, and
                    // the stream ends cleanly after it: an SDK raises the
                    // error instead of a bare disconnect.
                    let message = format!("the upstream stream failed: {e}");
                    let event = this.fail("upstream_error", "upstream_error", &message);
                    return Poll::Ready(Some(Ok(Frame::data(this.release(event)))));
                }
                Poll::Ready(None) => {
                    this.metered.whole = true;
                    let tail = this.metered.reader.finish();
                    // Released before the end settles the record, so
                    // that the request log sees the last frame.
                    let out = this.release(tail);
                    this.end("complete");
                    return Poll::Ready((!out.is_empty()).then(|| Ok(Frame::data(out))));
                }
                Poll::Pending if !this.held.is_empty() => {
                    // hyper writes to the client each time the body has
                    // nothing ready, so a chunk returned at once is one
                    // write each. The upstream's connection hands its
                    // chunks over one at a time, on its own task: give it
                    // turns to hand over what it has already read, and send
                    // what came together in one write. Nothing waits for
                    // bytes not yet received: two polls in a row that
                    // bring nothing send (hyper polls the body again at
                    // once after a write, so one is not yet a turn).
                    if took {
                        this.idle_polls = 0;
                    }
                    if this.idle_polls < 2 {
                        this.idle_polls += 1;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(this.release(Bytes::new())))));
                }
                Poll::Pending => {
                    if this.grace_over.as_mut().poll(cx).is_ready() {
                        // The server closes the connections still open a
                        // moment later: the client learns why, in its
                        // format, before the close.
                        let event = this.fail(
                            "shutdown",
                            "unavailable",
                            "the gateway is shutting down: the stream was cut at the end of \
                             its shutdown grace; send the request again",
                        );
                        return Poll::Ready(Some(Ok(Frame::data(event))));
                    }
                    // The deadline is the watchdog's (see `Expire`).
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ending.is_none()
    }
}

impl watchdog::Expire for RelayBody {
    /// The deadline passed: the stream ends with the error event in its
    /// format (after what is held), settled at what it used so far.
    fn expire(&mut self) -> Result<Bytes, Infallible> {
        let event = self.fail(
            "deadline",
            "deadline_exceeded",
            "the request's deadline passed mid-stream",
        );
        Ok(self.release(event))
    }
}

impl Drop for RelayBody {
    fn drop(&mut self) {
        // Dropped before its end: the client went away (hyper drops the
        // body of a connection that closed). The upstream call is
        // cancelled with it, and what the stream used is settled.
        if let Some(route) = self.ending.as_ref().map(|e| e.route) {
            observe::disconnected(route);
            self.end("client_disconnected");
        }
    }
}

/// A stream's reader and its reservation, settled however the stream
/// ends, on drop at the latest. A stream that ended whole settles at the
/// usage it reported.
///
/// One without that usage (cut before its end by an upstream reset, the
/// deadline or the client leaving; or ended without reporting) settles
/// apart:
/// - the token limits (the upstream's quota, paced here) at what it used
///   so far, not its whole `max_tokens`, so that a cut stream does not
///   starve the model's bucket (none reported and not cut: the estimate
///   stands);
/// - the budgets and the ledger (what is billed) at what it used so far
///   with its output never below `cut_share` of the output reserved
///   ([`charged`]): the upstream bills what it wrote before the cut,
///   hidden reasoning included, which the stream never shows.
struct Metered {
    reader: Box<dyn StreamReader>,
    reserved: Option<Reserved>,
    ledger: Option<Pending>,
    prompt_estimate: u64,
    completion_reserved: u64,
    cut_share: f64,
    chars_per_token: u64,
    whole: bool,
    bound: Bound,
    /// What the record handed over tells the access line.
    call: Option<access::Call>,
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
        let b = &self.bound;
        // What the stream reported, within what the call could use.
        let mut details = if self.whole {
            self.reader.details()
        } else {
            sluice_usage::Details::default()
        };
        let reported = self.whole.then(|| self.reader.usage()).flatten();
        let reported = bounded(&b.ceiling, &b.provider, &b.model, reported, &mut details);
        let so_far = self
            .reader
            .used_so_far(self.prompt_estimate, self.chars_per_token)
            .map(|mut u| {
                // Partly reported too: bounded alike (flagged once, above,
                // for a whole stream).
                b.ceiling
                    .clamp(&mut u, &mut sluice_usage::Details::default());
                u
            });
        let used = if self.whole { reported } else { so_far };
        let charged = reported.unwrap_or_else(|| {
            charged(
                so_far,
                self.prompt_estimate,
                self.completion_reserved,
                self.cut_share,
            )
        });
        reserved.settle_apart(used, Some(charged), true);
        let p = self.ledger.take()?;
        if reported.is_none() {
            // An estimate has no cached input or reasoning to tell.
            details = sluice_usage::Details::default();
        }
        let estimate = (charged.prompt_tokens, charged.completion_tokens);
        let (handed, call) = p.hand_over(reported, Some(estimate), details, timed);
        self.call = call;
        handed
    }
}

/// What a stream without its final usage is charged: what it used so
/// far (`None`: the reader cannot tell, the prompt's estimate), its
/// output at least `share` of the `reserved` output tokens.
fn charged(so_far: Option<Usage>, prompt_estimate: u64, reserved: u64, share: f64) -> Usage {
    let (prompt, streamed, share) = match so_far {
        Some(u) => (u.prompt_tokens, u.completion_tokens, share),
        None => (prompt_estimate, 0, 1.0),
    };
    // `share` is checked to be within 0..=1 at load; the product is at
    // most `reserved`.
    let floor = (reserved as f64 * share.clamp(0.0, 1.0)).ceil() as u64;
    let completion = streamed.max(floor.min(reserved));
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt.saturating_add(completion),
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
    ) -> (Option<Handed>, Option<access::Call>) {
        let Some(ledger) = self.state.observers.ledger.as_ref() else {
            return (None, None);
        };
        self.draft
            .used(&self.state.spend.prices, reported, so_far, details);
        let record = self.draft.finish(self.status, self.queued, self.attempts);
        let call = access::on().then(|| access::Call::of(&record));
        if timed {
            return (Some(ledger.submit_timed(record)), call);
        }
        ledger.submit(record);
        (None, call)
    }
}

/// The access line of a stream on `route` that began at `started`, when
/// it ends: from its ledger record's `call` when it has one, else from
/// its trace.
fn logged(
    route: &'static str,
    started: Instant,
    trace: Option<&Trace>,
    call: Option<access::Call>,
) {
    let (status, took) = match (&call, trace) {
        (_, Some(t)) => (t.status, t.started().elapsed()),
        (Some(c), None) => (200, Duration::from_millis(c.queue_ms + c.upstream_ms)),
        (None, None) => (200, started.elapsed()),
    };
    let call = call.or_else(|| {
        trace.map(|t| access::Call {
            tenant: Some(t.workspace.clone()),
            target: t.model.clone(),
            prompt_tokens: t.usage.map_or(0, |u| u.prompt_tokens),
            completion_tokens: t.usage.map_or(0, |u| u.completion_tokens),
            request_id: Some(t.request_id.clone()),
            ..access::Call::default()
        })
    });
    // A stream's answer began with 200 (its status is sent with its head).
    let status = if status == 0 { 200 } else { status };
    access::line("POST", route, status, took, "-", call.as_ref());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
        }
    }

    /// Issue 33: a stream cut after a few visible tokens was billed at
    /// those, while the upstream billed its hidden reasoning too. Its
    /// output is charged at least `share` of what was reserved.
    #[test]
    fn a_cut_stream_is_charged_at_least_its_share_of_the_reservation() {
        let streamed = Some(usage(12, 5));
        assert_eq!(charged(streamed, 10, 1_000, 1.0), usage(12, 1_000));
        assert_eq!(charged(streamed, 10, 1_000, 0.25), usage(12, 250));
        assert_eq!(charged(streamed, 10, 1_000, 0.0), usage(12, 5));
        // Streamed past its reservation (a low estimate): what it streamed.
        assert_eq!(
            charged(Some(usage(12, 1_500)), 10, 1_000, 1.0),
            usage(12, 1_500)
        );
        // A reader that cannot tell: the worst case, whatever the share.
        assert_eq!(charged(None, 10, 1_000, 0.0), usage(10, 1_000));
    }
}
