//! [`Grace`]: whether the gateway drains, and the end of its shutdown
//! grace, which requests still waiting (for the limiter, a pool or a
//! retry) watch so that they are answered 503 while their connections
//! can still carry it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::ApiError;

/// Draining, and the grace's end.
#[derive(Debug)]
pub(crate) struct Grace {
    draining: AtomicBool,
    /// Set when the shutdown grace is about to end.
    over: watch::Sender<bool>,
}

impl Default for Grace {
    fn default() -> Grace {
        Grace {
            draining: AtomicBool::new(false),
            over: watch::Sender::new(false),
        }
    }
}

impl Grace {
    /// Whether shutdown has begun.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Starts draining: readiness fails, new requests get 503.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Ends the grace: every wait in [`Grace::over`] ends.
    pub(crate) fn end(&self) {
        self.over.send_replace(true);
    }

    /// Refuses new work while draining.
    pub(crate) fn check_open(&self) -> Result<(), ApiError> {
        if self.is_draining() {
            return Err(ApiError::Unavailable {
                message: "the gateway is shutting down".into(),
                retry_after: Some(Duration::from_secs(1)),
            });
        }
        Ok(())
    }

    /// Resolves once [`Grace::end`] was called (never before).
    pub(crate) async fn over(&self) {
        let mut rx = self.over.subscribe();
        // The sender lives as long as the state: an error cannot happen
        // while anyone waits here.
        if rx.wait_for(|over| *over).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// [`Grace::over`] as a future of its own, for what outlives the
    /// request's handler (a stream's body).
    pub(crate) fn over_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.over.subscribe();
        async move {
            if rx.wait_for(|over| *over).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// `fut`'s output, or `None` when the shutdown grace has ended or ends
    /// before it is ready (as `select!`, biased to the grace, would
    /// answer). A future ready at its first poll (a grant, a free slot:
    /// most requests) is taken without watching the grace, which costs a
    /// subscription, a registered waiter and its removal.
    pub(crate) async fn unless_over<F: Future>(&self, fut: F) -> Option<F::Output> {
        if *self.over.borrow() {
            return None;
        }
        let mut fut = std::pin::pin!(fut);
        if let Poll::Ready(out) = crate::ready::first_poll(fut.as_mut()).await {
            return Some(out);
        }
        tokio::select! {
            biased;
            () = self.over() => None,
            out = fut => Some(out),
        }
    }

    /// The answer to a request still waiting when the grace ends.
    pub(crate) fn ended() -> ApiError {
        ApiError::Unavailable {
            message: "the gateway is shutting down: the request was still waiting when its grace ended; send it again".into(),
            retry_after: Some(Duration::from_secs(1)),
        }
    }
}
