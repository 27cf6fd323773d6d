//! The tower plumbing every layer of the stack shares: a layer is its
//! logic — a [`Step`] from a request to an answer, given the gateway's
//! state and the service below — and [`StepLayer`] / [`StepService`] make
//! a [`tower::Layer`] and a [`tower::Service`] of it, so that a layer's
//! file holds only what the layer does.
//!
//! A call costs what a hand-written service costs: the state (an `Arc`)
//! and the service below are cloned into one boxed future.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::task::{Context as TaskContext, Poll};

use futures_util::FutureExt;
use tower::{Layer, Service};

use super::BoxFuture;
use crate::state::AppState;

/// What a layer does with a request `R` on its way down to `S` (the
/// service below) and with the answer on its way back up. Implemented by
/// a type that names the layer and holds nothing (an empty enum): what it
/// needs is in the state it is given.
pub(crate) trait Step<R, S>: 'static {
    /// The answer it passes up.
    type Response: 'static;

    /// Serves `req` through `inner`.
    fn serve(
        state: AppState,
        inner: S,
        req: R,
    ) -> impl Future<Output = Self::Response> + Send + 'static;
}

/// The [`tower::Layer`] of the step `K`: wraps a stack in a
/// [`StepService`] that holds the gateway's state.
pub(crate) struct StepLayer<K> {
    state: AppState,
    step: PhantomData<fn() -> K>,
}

impl<K> StepLayer<K> {
    /// A layer that gives `state` to every call of its step.
    pub(crate) fn new(state: &AppState) -> Self {
        StepLayer {
            state: state.clone(),
            step: PhantomData,
        }
    }
}

impl<K> Clone for StepLayer<K> {
    fn clone(&self) -> Self {
        StepLayer::new(&self.state)
    }
}

impl<K> fmt::Debug for StepLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StepLayer")
            .field(&std::any::type_name::<K>())
            .finish()
    }
}

impl<K, S> Layer<S> for StepLayer<K> {
    type Service = StepService<K, S>;

    fn layer(&self, inner: S) -> StepService<K, S> {
        StepService {
            state: self.state.clone(),
            inner,
            step: PhantomData,
        }
    }
}

/// The step `K` above the service `S`: always ready, cheap to clone, and
/// its answers are never service errors (see [`super`]).
pub(crate) struct StepService<K, S> {
    state: AppState,
    inner: S,
    step: PhantomData<fn() -> K>,
}

impl<K, S: Clone> Clone for StepService<K, S> {
    fn clone(&self) -> Self {
        StepService {
            state: self.state.clone(),
            inner: self.inner.clone(),
            step: PhantomData,
        }
    }
}

impl<K, S: fmt::Debug> fmt::Debug for StepService<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepService")
            .field("step", &std::any::type_name::<K>())
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<K, R, S> Service<R> for StepService<K, S>
where
    K: Step<R, S>,
    S: Clone,
{
    type Response = K::Response;
    type Error = Infallible;
    type Future = BoxFuture<K::Response>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        let served = K::serve(self.state.clone(), self.inner.clone(), req);
        // `map`, not an `async` block around it: no second state machine.
        Box::pin(served.map(Ok))
    }
}
