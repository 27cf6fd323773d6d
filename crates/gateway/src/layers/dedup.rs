//! Dedup: requests that carry the same client id (`x-request-id` or
//! `Idempotency-Key`) while the first runs share its answer instead of
//! calling the upstream again.
//!
//! The admission queue keeps the flights ([`sluice_admit`]'s single
//! flight): this layer chooses the key on the way down and publishes the
//! answer to the requests that joined on the way up. Only whole answers
//! are shared: a stream cannot be handed to a second client.

use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use tower::{Layer, Service};

use super::model_call::Call;
use super::{BoxFuture, Next, Reply, Req, Served, call};

/// Wraps a stack in [`Dedup`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DedupLayer;

impl<S> Layer<S> for DedupLayer {
    type Service = Dedup<S>;

    fn layer(&self, inner: S) -> Dedup<S> {
        Dedup { inner }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Dedup<S> {
    inner: S,
}

impl<S> Service<Req<Call>> for Dedup<S>
where
    S: Next<Req<Call>, Served<Reply>>,
{
    type Response = Served<Reply>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<Reply>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Req<Call>) -> Self::Future {
        let inner = self.inner.clone();
        let c = &req.call;
        if c.ctx.client_id && !c.stream {
            req.call.share = Some(c.ctx.request_id.clone());
        }
        Box::pin(async move {
            let mut served = call(inner, req).await;
            // The slot's flight ends here: the joiners get this answer, and
            // requests with the same id that come later run again. Without
            // a flight (no client id, or a stream) nobody can have joined:
            // the answer is not copied for nobody.
            if let Some(permit) = served.notes.admission.take()
                && permit.is_leader()
            {
                match &served.result {
                    Ok(Reply::Buffered(b)) => permit.complete(Arc::new(Ok(b.clone()))),
                    Err(e) => permit.complete(Arc::new(Err(e.clone()))),
                    Ok(Reply::Stream(_) | Reply::Joined(_) | Reply::Cached(_)) => drop(permit),
                }
            }
            Ok(served)
        })
    }
}

#[cfg(test)]
#[path = "dedup/tests.rs"]
mod tests;
