//! Response bodies sent piece by piece: SSE streams paced by the latency
//! settings, and bodies cut short by a simulated disconnect.

use std::io;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::stream;
use serde_json::Value;
use tokio::sync::watch;

use crate::config::Latency;

/// One piece of a body and the pause before it.
pub(crate) type Piece = (Duration, Bytes);

/// An SSE event: `event: NAME` (if any) and one `data:` line.
pub(crate) fn event(name: Option<&str>, data: &Value) -> Bytes {
    let mut out = String::new();
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
    Bytes::from(out)
}

/// Paces events: `ttft` before the first, `per_token` before each token
/// event after the first token.
pub(crate) fn pace(events: Vec<(bool, Bytes)>, latency: Latency) -> Vec<Piece> {
    let mut first_token = true;
    let per_token = Duration::from_millis(latency.per_token_ms);
    events
        .into_iter()
        .enumerate()
        .map(|(i, (is_token, bytes))| {
            let mut wait = Duration::ZERO;
            if i == 0 {
                wait += Duration::from_millis(latency.ttft_ms);
            }
            if is_token {
                if !first_token {
                    wait += per_token;
                }
                first_token = false;
            }
            (wait, bytes)
        })
        .collect()
}

/// A whole body cut after its first half, for a disconnect outside a
/// stream.
pub(crate) fn halved(bytes: Bytes) -> Vec<Piece> {
    vec![(Duration::ZERO, bytes.slice(..bytes.len() / 2))]
}

/// Sleeps `wait`, or less if the sim shuts down; says whether it slept
/// the whole time.
pub(crate) async fn sleep_unless_shutdown(
    wait: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    if wait.is_zero() {
        return true;
    }
    tokio::select! {
        () = super::timer::sleep(wait) => true,
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

struct Pacer {
    pieces: std::vec::IntoIter<Piece>,
    sent: usize,
    /// Drop the connection after this many pieces.
    cut_after: Option<usize>,
    shutdown: watch::Receiver<bool>,
    done: bool,
}

/// A body that sends `pieces` after their pauses. With `cut_after`, the
/// body fails after that many pieces, and hyper drops the connection
/// without finishing the chunked encoding: what a client sees when an
/// upstream dies mid-stream. Shutdown cuts it too.
pub(crate) fn paced(
    pieces: Vec<Piece>,
    cut_after: Option<usize>,
    shutdown: watch::Receiver<bool>,
) -> Body {
    let pacer = Pacer {
        pieces: pieces.into_iter(),
        sent: 0,
        cut_after,
        shutdown,
        done: false,
    };
    Body::from_stream(stream::unfold(pacer, |mut p| async move {
        if p.done {
            return None;
        }
        if p.cut_after == Some(p.sent) {
            p.done = true;
            // Hyper drops its unflushed buffer along with the connection;
            // pausing once lets it flush what was "sent" before the cut.
            tokio::task::yield_now().await;
            return Some((Err(cut("simulated disconnect")), p));
        }
        let (wait, bytes) = p.pieces.next()?;
        if !sleep_unless_shutdown(wait, &mut p.shutdown).await {
            p.done = true;
            return Some((Err(cut("sim shutting down")), p));
        }
        p.sent += 1;
        Some((Ok(bytes), p))
    }))
}

fn cut(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing() {
        let b = Bytes::from_static(b"x");
        let latency = Latency {
            base_ms: 0,
            ttft_ms: 100,
            per_token_ms: 10,
            jitter_ms: 0,
        };
        let got: Vec<u64> = pace(
            vec![
                (false, b.clone()),
                (true, b.clone()),
                (true, b.clone()),
                (false, b),
            ],
            latency,
        )
        .into_iter()
        .map(|(d, _)| d.as_millis() as u64)
        .collect();
        assert_eq!(got, [100, 0, 10, 0]);
    }

    #[test]
    fn events() {
        let e = event(Some("ping"), &serde_json::json!({"type": "ping"}));
        assert_eq!(&e[..], b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }
}
