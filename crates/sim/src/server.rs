//! Starting and stopping the sim, and routing its paths.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::serve::ListenerExt;
use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Faults, Limits, SimConfig};
use crate::log::{Line, LogPage};
use crate::model::{self, Endpoint};
use crate::saas;
use crate::state::{Scope, Shared};
use crate::stats::Stats;
use crate::wire::Format;
use crate::wire::errors::Problem;
use crate::{Error, admin, discord, mcp};

/// How long [`SimHandle::shutdown`] waits for open connections to end.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The simulated upstreams, started with [`Sim::start`].
#[derive(Debug)]
pub struct Sim;

impl Sim {
    /// Binds `addr` (port 0 picks a free one) and serves `config` in a
    /// tokio task until the handle is shut down or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming a bad key, [`Error::Bind`] if the
    /// address is taken.
    pub async fn start(config: SimConfig, addr: SocketAddr) -> Result<SimHandle, Error> {
        config.validate()?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let local = listener.local_addr().map_err(Error::LocalAddr)?;
        // Streams are many small writes: do not let Nagle hold them back.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "sim: cannot set TCP_NODELAY");
            }
        });
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared::new(config, stopped.clone()));
        // The MCP server's sessions end with the sim.
        let mcp_stop = tokio_util::sync::CancellationToken::new();
        let app = router(Arc::clone(&shared), mcp_stop.clone());
        let mut signal = stopped;
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                // An error means the handle is gone: stop as well.
                let _ = signal.wait_for(|stop| *stop).await;
                mcp_stop.cancel();
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "sim server failed");
            }
        });
        tracing::debug!(%local, "sim listening");
        Ok(SimHandle {
            addr: local,
            shared,
            stop,
            task: Some(task),
        })
    }
}

/// A running sim. Dropping it stops the server (in the background);
/// [`SimHandle::shutdown`] stops it and waits.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://{addr}`, the base URL for clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counters so far, as `GET /_sim/stats` serves them.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Log entries after `since`, as `GET /_sim/log?since=N`.
    pub fn log(&self, since: u64) -> LogPage {
        self.shared.log_page(since)
    }

    /// The simulated Discord's effects and counters, as
    /// `GET /_sim/discord/effects`.
    pub fn discord(&self) -> discord::DiscordReport {
        self.shared.discord.report()
    }

    /// Replaces the simulated Discord's limits (buckets start full).
    pub fn set_discord_limits(&self, limits: discord::DiscordLimits) {
        self.shared.discord.set_limits(limits);
    }

    /// Forgets the simulated Discord's effects and counters.
    pub fn reset_discord(&self) {
        self.shared.discord.reset();
    }

    /// Zeroes the counters and empties the log, as `POST /_sim/reset`.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Replaces the faults of `scope`, as `POST /_sim/faults`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for bad values or an unknown API.
    pub fn set_faults(&self, scope: Scope, faults: Faults) -> Result<(), Error> {
        self.shared.set_faults(&scope, faults)
    }

    /// Replaces the limits of one model or API (buckets start full), as
    /// `POST /_sim/limits`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for bad values, [`Scope::All`] or an
    /// unknown API.
    pub fn set_limits(&self, scope: Scope, limits: Limits) -> Result<(), Error> {
        self.shared.set_limits(&scope, limits)
    }

    /// Stops accepting, cuts streams and hangs short, and waits (up to 5 s)
    /// for open connections to close.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err()
        {
            tracing::warn!("sim: connections still open after shutdown");
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

fn router(shared: Arc<Shared>, mcp_stop: tokio_util::sync::CancellationToken) -> Router {
    Router::new()
        .route_service("/mcp", mcp::service(Arc::clone(&shared), mcp_stop))
        .route("/_sim/stats", get(admin::stats))
        .route("/_sim/log", get(admin::log))
        .route("/_sim/faults", post(admin::faults))
        .route("/_sim/limits", post(admin::limits))
        .route("/_sim/reset", post(admin::reset))
        .route("/_sim/discord/effects", get(discord::effects))
        .route("/discord/api/v10/{*rest}", any(discord::serve))
        .fallback(dispatch)
        .with_state(shared)
}

/// `/v1/…` and `/{provider}/v1/…` go to the model provider (and
/// `/v1beta/models/…`, `/{provider}/v1beta/models/…` to Gemini's native
/// API), `/{api}/…` to the SaaS APIs.
async fn dispatch(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let trimmed = path.trim_start_matches('/');
    if let Some(response) = azure(&shared, &method, &uri, &headers, &body).await {
        return response;
    }
    let (first, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    let (provider, versioned) = if first == "v1" || first == "v1beta" {
        (None, Some(trimmed))
    } else if shared.config.providers.contains_key(first) {
        (Some(first.to_owned()), Some(rest))
    } else {
        (None, None)
    };
    let Some(versioned) = versioned else {
        let call = saas::Call {
            api: first.to_owned(),
            rest: format!("/{rest}"),
            method,
            path,
            headers,
            body,
        };
        return saas::serve(shared, call).await;
    };
    let found = if let Some(rest) = versioned.strip_prefix("v1beta/") {
        Endpoint::from_gemini_path(rest)
    } else {
        let rest = versioned.strip_prefix("v1/").unwrap_or("");
        Endpoint::from_path(rest).map(|(e, m)| (e, m, None))
    };
    match found {
        Some((endpoint, expected, model)) if expected == method => {
            let sse = uri
                .query()
                .is_some_and(|q| q.split('&').any(|kv| kv == "alt=sse"));
            let call = model::Call {
                endpoint,
                provider,
                model,
                sse,
                azure: false,
                method,
                path,
                headers,
                query_key: query_key(&uri),
                body,
            };
            model::serve(shared, call).await
        }
        found => {
            let status = if found.is_some() {
                StatusCode::METHOD_NOT_ALLOWED
            } else {
                StatusCode::NOT_FOUND
            };
            let line = Line::new(method.as_str(), &path, &headers);
            shared.log_only(line, status.as_u16());
            let problem = Problem::NotFound {
                message: format!("Invalid URL ({method} {path})"),
            };
            let mut r = problem.response(Format::OpenAi);
            *r.status_mut() = status;
            r.into_response()
        }
    }
}

/// Azure OpenAI's paths, `/openai/deployments/{deployment}/chat/completions`
/// and `/embeddings` (also under `/{provider}/…`), with the `api-version`
/// query Azure requires: `None` for any other path.
async fn azure(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Response> {
    let trimmed = uri.path().trim_start_matches('/');
    let (provider, rest) = match trimmed.split_once('/') {
        Some((p, rest)) if p != "openai" && shared.config.providers.contains_key(p) => {
            (Some(p.to_owned()), rest)
        }
        _ => (None, trimmed),
    };
    let (endpoint, deployment) = model::azure_path(rest)?;
    let path = uri.path().to_owned();
    let versioned = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv.starts_with("api-version=") && kv.len() > 12)
    });
    if !versioned || method != Method::POST {
        let status = if versioned {
            StatusCode::METHOD_NOT_ALLOWED
        } else {
            // What Azure answers without an api-version.
            StatusCode::NOT_FOUND
        };
        let line = Line::new(method.as_str(), &path, headers);
        shared.log_only(line, status.as_u16());
        let problem = Problem::NotFound {
            message: "Resource not found (an Azure OpenAI path needs ?api-version=…)".into(),
        };
        let mut r = problem.response(Format::Azure);
        *r.status_mut() = status;
        return Some(r.into_response());
    }
    let call = model::Call {
        endpoint,
        provider: provider.or_else(|| Some("azure".to_owned())),
        model: Some(deployment),
        sse: false,
        azure: true,
        method: method.clone(),
        path,
        headers: headers.clone(),
        query_key: None,
        body: body.clone(),
    };
    Some(model::serve(Arc::clone(shared), call).await)
}

/// The `key` of a query (Gemini's other place for its key), bounded.
fn query_key(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("key="))
        .filter(|k| k.len() <= 512)
        .map(str::to_owned)
}
