//! A streamed miss: passed to the client chunk by chunk while it is
//! assembled, stored once it ends with its end marker (never half), and
//! shared with the identical requests that joined its flight.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use futures_util::StreamExt;
use sluice_usage::cache::{Answer, StreamCapture};

use super::lookup::Pending;
use crate::cache::flight::Leader;

/// `res` (a streamed answer) with its body captured on the way. When the
/// stream ends properly the whole answer is stored and published to the
/// flight; a stream that fails, or that the client leaves, drops the
/// leader, and those who joined go upstream on their own.
pub(super) fn tee(pending: Pending, leader: Option<Leader>, res: Response) -> Response {
    let (parts, body) = res.into_parts();
    let tap = Tap {
        capture: pending.capture(),
        scanner: pending.scanner(),
        pending,
        leader,
    };
    let state = Some((body.into_data_stream(), tap));
    let stream = futures_util::stream::unfold(state, |state| async move {
        let (mut inner, mut tap) = state?;
        loop {
            match inner.next().await {
                Some(Ok(chunk)) => {
                    tap.capture.push(&chunk);
                    let out = tap.scanner.feed(chunk);
                    if !out.is_empty() {
                        return Some((Ok(out), Some((inner, tap))));
                    }
                }
                Some(Err(e)) => return Some((Err(std::io::Error::other(e)), None)),
                None => {
                    let tail = tap.scanner.finish();
                    finish(tap.capture, &tap.pending, tap.leader).await;
                    return (!tail.is_empty()).then_some((Ok(tail), None));
                }
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// What a stream passes on its way: the capture, the scanner that takes
/// out a usage chunk only the cache asked for, the miss and its flight.
struct Tap {
    capture: StreamCapture,
    scanner: sluice_usage::StreamScanner,
    pending: Pending,
    leader: Option<Leader>,
}

async fn finish(capture: StreamCapture, pending: &Pending, leader: Option<Leader>) {
    // Incomplete, failed or too large: nothing is stored or shared.
    let Ok(body) = capture.finish() else { return };
    let answer = Answer::json(body);
    pending.keep(answer.clone()).await;
    if let Some(leader) = leader {
        leader.publish(Arc::new(answer));
    }
}
