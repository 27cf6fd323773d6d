//! The plumbing every layer of the stack shares: a layer is its logic —
//! a [`Step`] from a request to an answer, given the gateway's state and
//! the service below — and [`StepLayer`] / [`StepService`] make a
//! [`tower::Layer`] and a [`Next`] of it, so that a layer's file holds
//! only what the layer does.
//!
//! The stack holds no state: the request brings it ([`Stateful`]; the
//! notes carry it from the context layer down), so the stack is a
//! zero-sized value. A call is the step's own future, which holds the
//! future of the layer below it inline: the stack is one future, made
//! with no allocation of its own. (Built per request with the state in
//! every layer, each call cloned the whole stack below it: about 250
//! atomic counts a request. With a boxed future per layer, a request made
//! thirteen boxes and every poll went down thirteen `dyn` calls.)

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use tower::Layer;

use super::Next;
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

/// A request that carries the gateway's state down the stack, so that
/// the stack itself holds nothing: built for nothing, cloned for nothing.
pub(crate) trait Stateful {
    /// The gateway's state.
    fn state(&self) -> &AppState;
}

impl<T> Stateful for super::Req<T> {
    fn state(&self) -> &AppState {
        &self.notes.state
    }
}

/// The [`tower::Layer`] of the step `K`: wraps a stack in a
/// [`StepService`].
pub(crate) struct StepLayer<K> {
    step: PhantomData<fn() -> K>,
}

impl<K> StepLayer<K> {
    /// The layer (it holds nothing: each call brings the state).
    pub(crate) const fn new() -> Self {
        StepLayer { step: PhantomData }
    }
}

impl<K> Default for StepLayer<K> {
    fn default() -> Self {
        StepLayer::new()
    }
}

impl<K> Clone for StepLayer<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for StepLayer<K> {}

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
            inner,
            step: PhantomData,
        }
    }
}

/// The step `K` above the service `S`: always ready, free to clone when
/// `S` is (a stack of steps above [`super::wire::Wire`] is zero-sized),
/// and its answers are never service errors (see [`super`]).
pub(crate) struct StepService<K, S> {
    inner: S,
    step: PhantomData<fn() -> K>,
}

impl<K, S: Clone> Clone for StepService<K, S> {
    fn clone(&self) -> Self {
        StepService {
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
            .finish()
    }
}

impl<K, R, S> Next<R, K::Response> for StepService<K, S>
where
    K: Step<R, S>,
    R: Stateful,
    S: Clone + Send + Sync + 'static,
{
    fn call(self, req: R) -> impl Future<Output = K::Response> + Send + 'static {
        // The step's own future, not boxed: it holds the one below it.
        K::serve(req.state().clone(), self.inner, req)
    }
}
