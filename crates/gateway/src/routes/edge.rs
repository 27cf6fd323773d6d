//! [`Edge`]: what every answer gets on its way out, whichever route (or
//! none) gave it — an `x-request-id` ([`stamp`]), `Connection: close`
//! when the request's body was left unread ([`body::close_if_unread`]),
//! and its line in the access log ([`crate::access`]).
//!
//! A service of its own around the router, not router layers: a layer on
//! an axum `Router` wraps every route in a boxed service, and a `from_fn`
//! middleware boxes its future and the rest of the stack again on every
//! call, so two middlewares and the body limit cost four boxed futures per
//! request, the largest (the handler's) copied each time. [`EdgeFuture`]
//! wraps the router's future in place.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::body::HttpBody;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Request, Uri};
use axum::response::Response;
use bytes::Bytes;
use tower::{Layer, Service};

use crate::access;
use crate::body;
use crate::request::{X_REQUEST_ID, client_request_id, stamp};

/// The router with what every answer gets (see the module doc).
#[derive(Debug, Clone)]
pub struct Edge {
    router: <DefaultBodyLimit as Layer<Router>>::Service,
}

impl Edge {
    /// `router` behind its edge. Bodies are read by the handlers, after the
    /// caller is known, under a cap of their own (see [`crate::body`]), so
    /// axum's default limit is off.
    pub(crate) fn new(router: Router) -> Self {
        Edge {
            router: DefaultBodyLimit::disable().layer(router),
        }
    }
}

impl<B> Service<Request<B>> for Edge
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<<Router as Service<axum::extract::Request>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<axum::extract::Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let given = client_request_id(req.headers()).map(str::to_owned);
        let logged = access::on().then(|| Logged {
            method: req.method().clone(),
            uri: req.uri().clone(),
            started: tokio::time::Instant::now(),
        });
        let (req, read) = body::watch(req);
        EdgeFuture {
            inner: self.router.call(req),
            read,
            given,
            logged,
        }
    }
}

/// The router's future, and what [`Edge`] adds to its answer.
pub struct EdgeFuture<F> {
    inner: F,
    read: Arc<AtomicBool>,
    given: Option<String>,
    /// What the access line needs of the request, when lines are written.
    logged: Option<Logged>,
}

/// The request as its access line names it.
struct Logged {
    method: Method,
    uri: Uri,
    started: tokio::time::Instant,
}

impl<F> std::fmt::Debug for EdgeFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeFuture")
            .field("given", &self.given)
            .finish_non_exhaustive()
    }
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut res) = ready!(Pin::new(&mut self.inner).poll(cx));
        body::close_if_unread(&self.read, &mut res);
        stamp(self.given.take(), &mut res);
        if let Some(l) = self.logged.take() {
            log(&l, &mut res);
        }
        Poll::Ready(Ok(res))
    }
}

/// The access line of `res`, unless a stream's relay writes it when the
/// stream ends; what observe learnt of the call goes with it (and is
/// taken off the answer).
fn log(l: &Logged, res: &mut Response) {
    if res.extensions().get::<access::Later>().is_some() {
        return;
    }
    let call = res.extensions_mut().remove::<access::Call>();
    let id = res
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    access::line(
        l.method.as_str(),
        l.uri.path(),
        res.status().as_u16(),
        l.started.elapsed(),
        id,
        call.as_ref(),
    );
}
