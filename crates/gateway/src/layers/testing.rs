//! What the layers' unit tests share: a state from the default config, and
//! a probe service that stands for the stack below a layer.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use tower::Service;

use super::BoxFuture;
use crate::config::Config;
use crate::state::AppState;

/// A state from the built-in defaults (no servers: the limiter is in
/// process, traces are off).
pub(crate) fn state() -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    state_with(config)
}

/// A state from `config`.
pub(crate) fn state_with(config: Config) -> AppState {
    AppState::new(config).expect("the default config starts")
}

/// The stack below a layer, answering with `F`.
pub(crate) struct Probe<F>(pub Arc<F>);

impl<F> Probe<F> {
    pub(crate) fn new(f: F) -> Self {
        Probe(Arc::new(f))
    }
}

impl<F> Clone for Probe<F> {
    fn clone(&self) -> Self {
        Probe(self.0.clone())
    }
}

impl<F, Req, Res> Service<Req> for Probe<F>
where
    F: Fn(Req) -> Res + Send + Sync + 'static,
    Req: Send + 'static,
    Res: Send + 'static,
{
    type Response = Res;
    type Error = Infallible;
    type Future = BoxFuture<Res>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let res = (self.0)(req);
        Box::pin(async move { Ok(res) })
    }
}
