//! The HTTP client of upstream calls: hyper's HTTP/1 connections over a
//! rustls connector, the same transport reqwest builds, without reqwest's
//! layers around it (with redirects off those layers still ran a redirect
//! policy and parsed each request's URL twice, about a sixth of a proxied
//! request's instructions: `docs/gateway.md`, "Where the time goes"), and
//! without hyper-util's pool ([`pool`] says why).
//!
//! What reqwest did is kept: TLS through rustls with the platform's
//! verifier and the process's crypto provider, HTTP/1.1 only, a 10 s
//! connect timeout, idle connections closed after about 90 s (60 to
//! 120 s unused: see [`pool`]), TCP keepalive (15 s, 3
//! probes), a 30 s TCP user timeout, `TCP_NODELAY`, `accept: */*` when the
//! caller sent none, redirects passed on as they are. A destination that
//! the environment's proxy settings (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`, `NO_PROXY`, read at start as reqwest reads them) send
//! through a proxy goes through reqwest as before.
//!
//! Whether a destination goes through a proxy depends only on its URL's
//! scheme and host, so it is decided once per provider and API when the
//! state is built ([`Routes`]), not on every request (parsing the host
//! against `NO_PROXY` cost about 640 instructions a request).
//!
//! Each serving thread (`http.threads`) has a pool of its own: a pooled
//! connection is driven by a task on the runtime that opened it, so a
//! request that took another thread's connection would wake that thread
//! to send and be woken back for the answer. A request whose idle
//! connection turns out closed before it was sent is sent again on a new
//! one, as hyper-util's client did.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{self, HeaderMap, HeaderValue, Method, Uri, header::ACCEPT, header::HOST};
use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use tower::Service;

mod pool;
mod routes;

pub(crate) use routes::Routes;

/// An upstream's answer, its body read as it arrives.
pub(crate) type UpstreamResponse = http::Response<Body>;

/// Connecting may take this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle pooled connection is closed after about this long (two to
/// four thirds of it: see `pool::drive`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

type Connector = HttpsConnector<HttpConnector>;

thread_local! {
    /// Which of [`UpstreamClient`]'s pools this thread's requests use:
    /// set by the serving threads ([`use_pool`]); 0 elsewhere.
    static POOL: Cell<usize> = const { Cell::new(0) };
}

/// Makes this thread's upstream calls use pool `index` (of those
/// [`UpstreamClient::new`] made; taken modulo their number).
pub(crate) fn use_pool(index: usize) {
    POOL.set(index);
}

/// See the module doc. Cloning shares the pools.
#[derive(Clone)]
pub(crate) struct UpstreamClient {
    /// Makes connections (TCP, then TLS for `https`).
    connector: Connector,
    /// One pool per serving thread.
    pools: Arc<[pool::Pool]>,
    /// An idle connection is closed after this long.
    idle_timeout: Duration,
    /// The environment's proxy settings.
    proxies: Arc<Matcher>,
    /// For destinations behind a proxy.
    proxied: reqwest::Client,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient").finish_non_exhaustive()
    }
}

/// How a request reaches its destination, as the environment's proxy
/// settings decide from its URL's scheme and host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Straight to the destination, through this thread's pool.
    Direct,
    /// Through the proxy the settings name (with reqwest).
    Proxied,
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) struct TransportError {
    connect: bool,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl TransportError {
    /// The connection could not be made (nothing was sent).
    pub(crate) fn is_connect(&self) -> bool {
        self.connect
    }
}

impl std::fmt::Display for TransportError {
    /// A sentence without the URL (it may hold a key).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.connect {
            "cannot connect to upstream"
        } else {
            "upstream request failed"
        };
        // The innermost cause says most ("connection refused").
        let mut cause: &dyn std::error::Error = &*self.source;
        while let Some(next) = cause.source() {
            cause = next;
        }
        write!(f, "{kind}: {cause}")
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl From<reqwest::Error> for TransportError {
    fn from(e: reqwest::Error) -> Self {
        TransportError {
            connect: e.is_connect(),
            source: Box::new(e),
        }
    }
}

impl TransportError {
    /// The connection could not be made.
    fn connect(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        TransportError {
            connect: true,
            source: e.into(),
        }
    }
}

impl UpstreamClient {
    /// The client, with `pools` connection pools (one per serving thread,
    /// at least one) and `proxied` (which reads the same environment) for
    /// destinations the environment's proxy settings send to a proxy.
    ///
    /// # Errors
    /// The platform's certificate verifier cannot be set up.
    pub(crate) fn new(proxied: reqwest::Client, pools: usize) -> Result<Self, String> {
        Self::with_proxies(proxied, Matcher::from_env(), pools)
    }

    /// [`UpstreamClient::new`] with the proxy settings `proxies`, which
    /// `proxied` must share.
    fn with_proxies(
        proxied: reqwest::Client,
        proxies: Matcher,
        pools: usize,
    ) -> Result<Self, String> {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
            .map_err(|e| format!("TLS certificate verifier: {e}"))?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_keepalive(Some(Duration::from_secs(15)));
        http.set_keepalive_interval(Some(Duration::from_secs(15)));
        http.set_keepalive_retries(Some(3));
        http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(UpstreamClient {
            connector: https,
            pools: (0..pools.max(1)).map(|_| pool::Pool::default()).collect(),
            idle_timeout: IDLE_TIMEOUT,
            proxies: Arc::new(proxies),
            proxied,
        })
    }

    /// The route of a request to `uri` (only its scheme and host count).
    pub(crate) fn route(&self, uri: &Uri) -> Route {
        match self.proxies.intercept(uri) {
            Some(_) => Route::Proxied,
            None => Route::Direct,
        }
    }

    /// Sends one request by `route` (decided for `uri` now when `None`)
    /// and waits for the answer's head.
    ///
    /// # Errors
    /// The connection failed or broke before the head came.
    pub(crate) async fn send(
        &self,
        route: Option<Route>,
        method: Method,
        uri: &Uri,
        mut headers: HeaderMap,
        host: Option<&HeaderValue>,
        body: Bytes,
    ) -> Result<UpstreamResponse, TransportError> {
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        if route.unwrap_or_else(|| self.route(uri)) == Route::Proxied {
            let url = reqwest::Url::parse(&uri.to_string()).map_err(|e| TransportError {
                connect: true,
                source: Box::new(e),
            })?;
            let res = self
                .proxied
                .request(method, url)
                .headers(headers)
                .body(body)
                .send()
                .await?;
            return Ok(http::Response::<reqwest::Body>::from(res).map(Body::new));
        }
        // The `Host` hyper-util added last, made once for the URL.
        if !headers.contains_key(HOST) {
            let made = match host {
                Some(host) => Some(host.clone()),
                None => host_header(uri),
            };
            if let Some(host) = made {
                headers.insert(HOST, host);
            }
        }
        let mut req = http::Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = origin_form(uri);
        *req.headers_mut() = headers;
        let index = POOL.get() % self.pools.len();
        loop {
            let conn = match self.pools[index].checkout(uri) {
                Some(conn) => conn,
                None => self.connect(uri).await?,
            };
            let mut conn = conn;
            match conn.sender.try_send_request(req).await {
                Ok(res) => {
                    let pools = Arc::clone(&self.pools);
                    let res = res.map(|b| Body::new(pool::PooledBody::new(b, conn, pools, index)));
                    return Ok(res);
                }
                Err(mut e) => match e.take_message() {
                    // Not sent: the idle connection had closed. Once more,
                    // on a new one (a new one that fails is the answer).
                    Some(again) if conn.reused => req = again,
                    _ => {
                        return Err(TransportError {
                            connect: false,
                            source: Box::new(e.into_error()),
                        });
                    }
                },
            }
        }
    }

    /// A new connection to `uri`, driven by a task of this runtime.
    ///
    /// # Errors
    /// Connecting, the TLS handshake or HTTP/1's failed (a connect error).
    async fn connect(&self, uri: &Uri) -> Result<pool::Conn, TransportError> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(TransportError::connect)?;
        let io = connector
            .call(uri.clone())
            .await
            .map_err(TransportError::connect)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(TransportError::connect)?;
        pool::Conn::new(uri, sender, conn, self.idle_timeout)
            .ok_or_else(|| TransportError::connect("the URI has no scheme and host"))
    }
}

/// `uri` as a request to its host names it: its path and query.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(pq) if pq.as_str() != "/" => Uri::from(pq.clone()),
        _ => Uri::from_static("/"),
    }
}

/// The `Host` header of a request to `uri`, as hyper-util's client makes
/// it when a request has none: the host, and the port unless it is the
/// scheme's default.
pub(crate) fn host_header(uri: &Uri) -> Option<HeaderValue> {
    let host = uri.host()?;
    let secure = matches!(uri.scheme_str(), Some("https" | "wss"));
    match uri.port() {
        Some(port) if !matches!((port.as_u16(), secure), (443, true) | (80, false)) => {
            HeaderValue::from_str(&format!("{host}:{port}")).ok()
        }
        _ => HeaderValue::from_str(host).ok(),
    }
}

#[cfg(test)]
mod tests;
