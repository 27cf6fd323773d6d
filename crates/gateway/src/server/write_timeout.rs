//! The server's write timeout: a connection whose client takes none of
//! the bytes the server has to write for `http.write_timeout_ms` fails
//! with [`std::io::ErrorKind::TimedOut`], so hyper closes it and drops
//! the answer it was writing, with everything that answer held (its
//! stream, pool slot, grant and upstream connection).
//!
//! It sits on the socket, not in the answer's body, because a body is
//! polled only while its connection can take more bytes: a client that
//! never reads leaves the body unpolled, its own timers unseen (issue
//! 33, 34). The timer is armed only while a write waits (the socket's
//! buffer is full), which an answer to a reading client rarely does.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `io` whose writes fail after waiting `timeout` without progress.
#[derive(Debug)]
pub(super) struct WriteTimeout<T> {
    io: T,
    timeout: Duration,
    /// The timer of the write that waits now, if one does; kept (and
    /// reset) across waits so that a connection allocates it once.
    stalled: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl<T> WriteTimeout<T> {
    pub(super) fn new(io: T, timeout: Duration) -> Self {
        WriteTimeout {
            io,
            timeout,
            stalled: None,
            armed: false,
        }
    }

    /// `polled`, the outcome of a write: progress disarms the timer, a
    /// wait arms it (once per wait) and fails once it has run out.
    fn guard<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.armed = false;
            return polled;
        }
        let deadline = Instant::now() + self.timeout;
        let sleep = match &mut self.stalled {
            Some(s) => {
                if !self.armed {
                    s.as_mut().reset(deadline);
                }
                s
            }
            None => self
                .stalled
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.armed = true;
        if sleep.as_mut().poll(cx).is_ready() {
            self.armed = false;
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no bytes within http.write_timeout_ms",
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.guard(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.guard(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.guard(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.guard(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// Polls `f` once.
    async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
    }

    /// A peer that never reads: the writer's buffer fills, and the write
    /// that waits then fails once the timeout has run out, not before.
    #[tokio::test(start_paused = true)]
    async fn a_write_that_waits_past_the_timeout_fails() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = WriteTimeout::new(ours, Duration::from_secs(30));
        io.write_all(&[0; 64]).await.unwrap();
        let mut write = std::pin::pin!(io.write_all(&[1; 64]));
        assert!(poll_once(&mut write).await.is_pending());
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(poll_once(&mut write).await.is_pending(), "not yet");
        tokio::time::advance(Duration::from_secs(2)).await;
        match poll_once(&mut write).await {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("{other:?}"),
        }
    }

    /// A slow reader that keeps taking bytes is never cut: the timer
    /// counts from the last progress.
    #[tokio::test(start_paused = true)]
    async fn progress_restarts_the_timer() {
        use tokio::io::AsyncReadExt;
        let (ours, mut theirs) = tokio::io::duplex(8);
        let mut io = WriteTimeout::new(ours, Duration::from_secs(30));
        let writer = tokio::spawn(async move { io.write_all(&[7; 64]).await });
        let mut got = Vec::new();
        while got.len() < 64 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            let mut b = [0; 8];
            let n = theirs.read(&mut b).await.unwrap();
            got.extend_from_slice(&b[..n]);
        }
        writer.await.unwrap().expect("never timed out");
    }
}
