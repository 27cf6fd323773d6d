//! What the layers' unit tests share: a state from the default config, and
//! a probe service that stands for the stack below a layer.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use bytes::Bytes;
use sluice_usage::Endpoint;
use tower::Service;

use super::context::{Context, Parse};
use super::models::{Call, Incoming};
use super::{BoxFuture, Notes, Reply, Req};
use crate::auth::Tenant;
use crate::config::Config;
use crate::response::Buffered;
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

/// The stack below a layer, answering with the future `F` returns.
pub(crate) struct Later<F>(pub Arc<F>);

impl<F> Later<F> {
    pub(crate) fn new(f: F) -> Self {
        Later(Arc::new(f))
    }
}

impl<F> Clone for Later<F> {
    fn clone(&self) -> Self {
        Later(self.0.clone())
    }
}

impl<F, Fut, Req> Service<Req> for Later<F>
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
    Req: Send + 'static,
{
    type Response = Fut::Output;
    type Error = Infallible;
    type Future = BoxFuture<Fut::Output>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let fut = (self.0)(req);
        Box::pin(async move { Ok(fut.await) })
    }
}

/// A model call for `model` with `headers`, as the context layer reads it.
pub(crate) fn model_call(
    state: &AppState,
    model: &str,
    stream: bool,
    headers: &[(&'static str, &'static str)],
) -> Req<Call> {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, HeaderValue::from_static(v));
    }
    let tenant = Tenant::from_headers(state, &h).expect("an open gateway");
    let ctx = Context::from_headers(state, &tenant, &h).expect("good headers");
    let body = serde_json::json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let incoming = Incoming {
        endpoint: Endpoint::Chat,
        tenant,
        headers: h,
        body: serde_json::to_vec(&body).unwrap().into(),
    };
    let mut notes = Notes::default();
    let call = incoming.parse(state, ctx, &mut notes).expect("a good call");
    Req { call, notes }
}

/// A whole answer with `body`.
pub(crate) fn buffered(body: &'static str) -> Reply {
    Reply::Buffered(Buffered {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::from_static(body.as_bytes()),
    })
}

/// The body of a whole (or shared) answer.
pub(crate) fn body_of(reply: &Reply) -> Bytes {
    match reply {
        Reply::Buffered(b) => b.body.clone(),
        Reply::Joined(shared) => match &**shared {
            Ok(b) => b.body.clone(),
            Err(e) => panic!("a shared refusal: {e}"),
        },
        Reply::Stream(_) => panic!("a stream"),
        Reply::Cached(_) => panic!("a cached answer"),
    }
}
