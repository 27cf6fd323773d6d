//! [`LimitFuture`]: what a [`RateLimiter`](crate::RateLimiter) call
//! returns, without an allocation for the in-process limiter.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::{Acquire, Error, Grant, Permit};

/// The future of a [`RateLimiter`] call.
///
/// The in-process limiter answers at once or waits in its own [`Acquire`]
/// future, neither of which allocates here; other limiters box theirs
/// ([`LimitFuture::boxed`]).
#[must_use = "futures do nothing unless polled"]
pub struct LimitFuture<'a, T>(Pending<'a, T>);

enum Pending<'a, T> {
    Ready(Option<T>),
    Acquire(Acquire, fn(Result<Grant, Error>) -> T),
    Boxed(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

impl<'a, T> LimitFuture<'a, T> {
    /// A future that answers `value` at once.
    pub fn ready(value: T) -> Self {
        LimitFuture(Pending::Ready(Some(value)))
    }

    /// Boxes `future`.
    pub fn boxed(future: impl Future<Output = T> + Send + 'a) -> Self {
        LimitFuture(Pending::Boxed(Box::pin(future)))
    }
}

impl From<Acquire> for LimitFuture<'_, Result<Permit, Error>> {
    fn from(acquire: Acquire) -> Self {
        LimitFuture(Pending::Acquire(acquire, |r| r.map(Permit::from)))
    }
}

impl<T: Unpin> Future for LimitFuture<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut self.get_mut().0 {
            Pending::Ready(value) => Poll::Ready(value.take().expect("polled after completion")),
            Pending::Acquire(acquire, done) => Pin::new(acquire).poll(cx).map(*done),
            Pending::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for LimitFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.0 {
            Pending::Ready(_) => "ready",
            Pending::Acquire(..) => "acquiring",
            Pending::Boxed(_) => "boxed",
        };
        f.debug_tuple("LimitFuture").field(&state).finish()
    }
}
