//! The client's idle connections: hyper's HTTP/1 connections, a list per
//! serving thread, found by the scheme and authority of the request's URI
//! compared as they are (hyper-util's pool hashed that key with SipHash,
//! byte by byte, three times a request, under a lock, and spawned a task
//! per request to wait for the connection to be free again).
//!
//! A connection goes back to its list when its answer's body has been
//! read to the end ([`PooledBody`]): hyper frees an HTTP/1 connection in
//! the same poll that ends the body, so it is ready by then. An answer
//! dropped before its end takes its connection with it (hyper closes a
//! connection whose answer was not read, as it did in hyper-util's pool).
//!
//! Each connection is driven by a task of its own ([`drive`]), which also
//! closes it once it has sat in the list, unused, for about the idle
//! timeout (two to four thirds of it; no clock is read per request).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Uri;
use axum::http::uri::{Authority, Scheme};
use bytes::Bytes;

use http_body_util::Full;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Connection, SendRequest};

/// The request side of a connection.
pub(super) type Sender = SendRequest<Full<Bytes>>;

/// One connection, idle in a list or sending a request.
#[derive(Debug)]
pub(super) struct Conn {
    scheme: Scheme,
    authority: Authority,
    pub(super) sender: Sender,
    /// Shared with the task that drives the connection.
    idle: Arc<Idle>,
    /// Whether it served a request before this one.
    pub(super) reused: bool,
}

/// What the task driving a connection knows of its use.
#[derive(Debug, Default)]
struct Idle {
    /// In a list, waiting for a request.
    listed: AtomicBool,
    /// Requests taken from the list (the task compares counts, so that
    /// no clock is read per request).
    taken: AtomicU64,
}

impl Conn {
    /// A new connection to `uri`'s scheme and authority (`None` when the
    /// URI has neither), sending through `sender`, driven by `conn` on a
    /// task of this runtime that closes it after `idle_timeout` unused.
    pub(super) fn new<T>(
        uri: &Uri,
        sender: Sender,
        conn: Connection<T, Full<Bytes>>,
        idle_timeout: Duration,
    ) -> Option<Conn>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (scheme, authority) = (uri.scheme()?.clone(), uri.authority()?.clone());
        let idle = Arc::new(Idle::default());
        tokio::spawn(drive(conn, Arc::clone(&idle), idle_timeout));
        Some(Conn {
            scheme,
            authority,
            sender,
            idle,
            reused: false,
        })
    }

    fn goes_to(&self, uri: &Uri) -> bool {
        uri.scheme() == Some(&self.scheme) && uri.authority() == Some(&self.authority)
    }
}

/// Drives `conn` until it ends, or until it has been found in a list,
/// not taken since the tick before, at three ticks of a third of
/// `idle_timeout` in a row: after two to four thirds of it unused
/// (hyper-util's pool, which looked every `idle_timeout` for connections
/// idle that long, closed them after one to two).
async fn drive<T>(conn: Connection<T, Full<Bytes>>, idle: Arc<Idle>, idle_timeout: Duration)
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let tick = idle_timeout / 3;
    let expire = async {
        let (mut seen, mut unused) = (u64::MAX, 0);
        loop {
            tokio::time::sleep(tick).await;
            let taken = idle.taken.load(Ordering::Relaxed);
            if idle.listed.load(Ordering::Relaxed) && taken == seen {
                unused += 1;
                if unused == 3 {
                    return;
                }
            } else {
                (seen, unused) = (taken, 0);
            }
        }
    };
    // An error ends the connection; the request it failed, if any, got
    // the error.
    tokio::select! {
        _ = conn => {}
        () = expire => {}
    }
}

/// The idle connections of one serving thread, the most recently used
/// last.
#[derive(Debug, Default)]
pub(super) struct Pool {
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// An idle connection to `uri`'s scheme and authority that can take a
    /// request, if there is one (closed ones met on the way are dropped).
    pub(super) fn checkout(&self, uri: &Uri) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            if idle[i].sender.is_closed() {
                idle.remove(i);
            } else if idle[i].goes_to(uri) && idle[i].sender.is_ready() {
                let mut conn = idle.remove(i);
                conn.idle.listed.store(false, Ordering::Relaxed);
                conn.idle.taken.fetch_add(1, Ordering::Relaxed);
                conn.reused = true;
                return Some(conn);
            }
        }
        None
    }

    /// Lists `conn` for the next request, if it can take one.
    fn put(&self, conn: Conn) {
        if !conn.sender.is_ready() {
            return;
        }
        conn.idle.listed.store(true, Ordering::Relaxed);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.push(conn);
    }

    /// How many connections are listed (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// An answer's body that gives its connection back to `pools[index]`
/// once it has been read to the end.
#[derive(Debug)]
pub(super) struct PooledBody {
    body: Incoming,
    back: Option<(Conn, Arc<[Pool]>, usize)>,
}

impl PooledBody {
    pub(super) fn new(body: Incoming, conn: Conn, pools: Arc<[Pool]>, index: usize) -> Self {
        PooledBody {
            body,
            back: Some((conn, pools, index)),
        }
    }

    fn give_back(&mut self) {
        if let Some((conn, pools, index)) = self.back.take() {
            pools[index].put(conn);
        }
    }
}

impl HttpBody for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            this.give_back();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // A body with nothing left to read (none at all, say) frees its
        // connection even if no one asked for its end.
        if self.body.is_end_stream() {
            self.give_back();
        }
    }
}

#[cfg(test)]
#[path = "pool/tests.rs"]
mod tests;
