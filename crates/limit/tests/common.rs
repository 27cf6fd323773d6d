//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Polls once with a no-op waker: enough to see pending versus ready.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(f).poll(&mut cx)
}

/// Unwraps a ready poll.
pub fn ready<T>(p: Poll<T>) -> T {
    match p {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("expected ready, got pending"),
    }
}
