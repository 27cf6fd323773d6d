//! The live dashboard's data: what each request leaves behind
//! ([`pulse`]), a snapshot a second ([`sample`]), a short history of them
//! for the charts, and the live stream the page and `sluice top` read.
//!
//! Bounded everywhere: the totals by key count, the history by
//! `ui.history_seconds`, the stream by `ui.max_streams` and by a
//! broadcast of [`STREAM_BACKLOG`] snapshots — a client that falls
//! further behind is dropped, not buffered for.

pub(crate) mod logins;
pub(crate) mod pulse;
pub(crate) mod sample;
pub(crate) mod sessions;
pub(crate) mod tools;
pub mod view;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast;

use logins::FailedLogins;
use pulse::Pulse;
use sessions::Sessions;
use view::{Point, Snapshot};

/// Where a browser trades a token for a session.
pub(crate) const LOGIN_PATH: &str = "/ui/login";

/// How often a snapshot is taken and sent.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Snapshots a stream may fall behind before it is dropped.
pub(crate) const STREAM_BACKLOG: usize = 8;

/// The dashboard's state, one per gateway.
#[derive(Debug)]
pub(crate) struct Board {
    /// What requests left behind.
    pub(crate) pulse: Pulse,
    /// Browser sessions opened at `/ui/login`.
    pub(crate) sessions: Sessions,
    /// Failed logins by client address.
    pub(crate) logins: FailedLogins,
    /// Wrong operator tokens (admin, dashboard, metrics) on the API routes
    /// by client address: counted apart from the logins, so that neither
    /// locks the other out.
    pub(crate) tokens: FailedLogins,
    /// MCP tool calls, for their section.
    pub(crate) tools: tools::ToolTally,
    history: Mutex<VecDeque<Point>>,
    history_len: usize,
    latest: Mutex<Option<Arc<Snapshot>>>,
    /// Each snapshot as one SSE event, for every stream.
    events: broadcast::Sender<Bytes>,
    streams: AtomicUsize,
    max_streams: usize,
}

/// A stream's place among `ui.max_streams`; given back on drop.
#[derive(Debug)]
pub(crate) struct StreamSlot(Arc<Board>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Board {
    pub(crate) fn new(config: &crate::config::UiConfig) -> Board {
        Board {
            pulse: Pulse::default(),
            sessions: Sessions::default(),
            logins: FailedLogins::default(),
            tokens: FailedLogins::default(),
            tools: tools::ToolTally::default(),
            history: Mutex::new(VecDeque::new()),
            history_len: config.history_seconds as usize,
            latest: Mutex::new(None),
            events: broadcast::Sender::new(STREAM_BACKLOG),
            streams: AtomicUsize::new(0),
            max_streams: config.max_streams,
        }
    }

    /// The last snapshot taken, if any yet.
    pub(crate) fn latest(&self) -> Option<Arc<Snapshot>> {
        self.latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The history, oldest first.
    pub(crate) fn history(&self) -> Vec<Point> {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// The snapshots to come, each a `snapshot` event.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Bytes> {
        self.events.subscribe()
    }

    /// Publishes a snapshot: kept as the latest, its point added to the
    /// history (the oldest dropped past its length), sent to the streams.
    pub(crate) fn publish(&self, snapshot: Snapshot) {
        let point = Point::of(&snapshot);
        {
            let mut h = self.history.lock().unwrap_or_else(PoisonError::into_inner);
            h.push_back(point);
            while h.len() > self.history_len {
                h.pop_front();
            }
        }
        let event = sse_event("snapshot", &snapshot);
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(snapshot));
        // No stream listening is not an error.
        let _ = self.events.send(event);
    }
}

/// One server-sent event of `data` as JSON.
pub(crate) fn sse_event(name: &str, data: &impl serde::Serialize) -> Bytes {
    let json = serde_json::to_string(data).unwrap_or_else(|_| "null".into());
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

/// A place for one more stream of `board`; `None` when `ui.max_streams`
/// are open.
pub(crate) fn stream_slot(board: &Arc<Board>) -> Option<StreamSlot> {
    board
        .streams
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < board.max_streams).then_some(n + 1)
        })
        .ok()?;
    Some(StreamSlot(Arc::clone(board)))
}
