//! A response body's deadline, kept from outside the body: a task of its
//! own ends the body when its request's deadline passes, whether or not
//! the client reads.
//!
//! A body is polled only while its connection can take more bytes. A
//! client that stops reading (its socket's buffers full) leaves the body
//! unpolled, and a deadline checked in the body's poll is never seen:
//! the stream, its pool slot, its grant and its upstream connection
//! stayed held past the deadline for as long as the client liked (issue
//! 33, 34). Here the watchdog takes the body out at the deadline and
//! drops it, releasing all of that at once; the connection itself is
//! closed by the server's write timeout (`server/write_timeout.rs`).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use axum::body::HttpBody;
use bytes::Bytes;
use hyper::body::Frame;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

/// A body that can be ended from outside its poll.
pub(crate) trait Expire:
    HttpBody<Data = Bytes, Error: Send> + Unpin + Send + 'static
{
    /// Ends the body at its deadline: settles what it must, and says how
    /// the client's body ends: `Ok` with the last bytes (an error event
    /// in the stream's format) then a clean end, or `Err` to break the
    /// response off (a body of unknown format, which must not look
    /// whole). What the body holds is released when it is dropped,
    /// right after.
    fn expire(&mut self) -> Result<Bytes, Self::Error>;
}

/// `body`, ended at `deadline` by a watchdog task even if nobody polls
/// it.
pub(crate) fn watched<B: Expire>(body: B, deadline: Instant) -> Watched<B> {
    let shared = Arc::new(Mutex::new(Slot {
        body: Some(body),
        last: None,
        waker: None,
    }));
    let weak = Arc::downgrade(&shared);
    let task = tokio::spawn(async move {
        tokio::time::sleep_until(deadline).await;
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let (body, waker) = {
            let mut slot = lock(&shared);
            let Some(mut body) = slot.body.take() else {
                return;
            };
            slot.last = Some(body.expire());
            (body, slot.waker.take())
        };
        // Dropped outside the lock: the upstream connection, the pool
        // slot and the grant go back here.
        drop(body);
        // A poll waiting for the upstream sends the last bytes now.
        if let Some(w) = waker {
            w.wake();
        }
    });
    Watched {
        shared,
        _watchdog: AbortOnDropHandle::new(task),
    }
}

/// See [`watched`].
pub(crate) struct Watched<B: Expire> {
    shared: Arc<Mutex<Slot<B>>>,
    /// Aborted when the body is dropped: a body that ended leaves no task.
    _watchdog: AbortOnDropHandle<()>,
}

struct Slot<B: Expire> {
    /// The body, until it ends or expires.
    body: Option<B>,
    /// How an expired body ends, once, for the client.
    last: Option<Result<Bytes, B::Error>>,
    /// The waker of the last poll that waited.
    waker: Option<Waker>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing held across the lock can be left half-changed by a panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<B: Expire> HttpBody for Watched<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut slot = lock(&self.shared);
        let slot = &mut *slot;
        if let Some(body) = slot.body.as_mut() {
            let polled = Pin::new(body).poll_frame(cx);
            match &polled {
                Poll::Pending => match &slot.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => slot.waker = Some(cx.waker().clone()),
                },
                Poll::Ready(None) => slot.body = None,
                Poll::Ready(Some(_)) => {}
            }
            return polled;
        }
        match slot.last.take() {
            Some(Ok(bytes)) if !bytes.is_empty() => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            Some(Ok(_)) | None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let slot = lock(&self.shared);
        match &slot.body {
            Some(b) => b.is_end_stream(),
            None => slot.last.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use http_body_util::BodyExt;

    use super::*;

    /// A body that never has anything (an upstream that went quiet), and
    /// says when it was expired and dropped.
    struct Quiet {
        expired: Arc<AtomicBool>,
        dropped: Arc<AtomicBool>,
    }

    impl HttpBody for Quiet {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Pending
        }
    }

    impl Expire for Quiet {
        fn expire(&mut self) -> Result<Bytes, Infallible> {
            self.expired.store(true, Ordering::SeqCst);
            Ok(Bytes::from_static(b"data: deadline\n\n"))
        }
    }

    impl Drop for Quiet {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn quiet() -> (Quiet, Arc<AtomicBool>, Arc<AtomicBool>) {
        let (e, d) = (Arc::default(), Arc::default());
        let q = Quiet {
            expired: Arc::clone(&e),
            dropped: Arc::clone(&d),
        };
        (q, e, d)
    }

    /// Issue 33 and 34: nobody polls the body (the client does not read);
    /// at the deadline it is expired and dropped all the same.
    #[tokio::test(start_paused = true)]
    async fn a_body_nobody_polls_is_ended_at_its_deadline() {
        let (q, expired, dropped) = quiet();
        let body = watched(q, Instant::now() + Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(!expired.load(Ordering::SeqCst) && !dropped.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(expired.load(Ordering::SeqCst) && dropped.load(Ordering::SeqCst));
        // Read afterwards: the last bytes, then the end.
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"data: deadline\n\n");
    }

    /// A client waiting on a quiet upstream gets the last bytes at the
    /// deadline.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_poll_is_woken_at_the_deadline() {
        let (q, _, dropped) = quiet();
        let body = watched(q, Instant::now() + Duration::from_secs(5));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"data: deadline\n\n");
        assert!(dropped.load(Ordering::SeqCst));
    }

    /// A body dropped before its deadline leaves no task behind.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_ended_takes_its_watchdog_with_it() {
        let (q, expired, dropped) = quiet();
        let body = watched(q, Instant::now() + Duration::from_secs(5));
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!expired.load(Ordering::SeqCst), "never expired");
    }
}
