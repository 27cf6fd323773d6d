//! [`Upstream`]: one MCP server the gateway fronts, connected on first use
//! (and at start, in the background), connected again after its
//! connection closes or its child process exits; its tools, resources,
//! resource templates and prompts cached until it says they changed.
//!
//! Calls of a server over HTTP go on a connection of the thread that makes
//! them ([`Upstream::request`]). The SDK's connection is tasks (its
//! service loop, its transport's worker, a task per POST and per answer
//! stream) on the runtime it was opened on, and a call hands its request
//! to them and gets its answer back through them; each of the gateway's
//! serving threads runs a runtime of its own, so a call on a connection
//! opened elsewhere woke another thread at each of those hops, there and
//! back. Listings and subscriptions keep to the first connection, the
//! one whose notifications the clients' sessions hear.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ProgressToken, Prompt, RequestId, Resource, ResourceTemplate,
    ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{
    Peer, PeerRequestOptions, RoleClient, RoleServer, RunningService, ServiceError,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::UpstreamError;
use crate::listeners::Listeners;
use crate::relay::{Counted, List, Relay};
use crate::spec::{ServerSpec, Transport};

/// Most tools (and, each, resources, resource templates and prompts) one
/// server may offer; more are a misbehaving server, and the rest are not
/// listed.
pub const MAX_TOOLS_PER_SERVER: usize = 1_024;

/// Calls in flight to one Streamable HTTP server at once, per
/// connection (the gateway's bulkhead bounds them before this).
const MAX_CONCURRENT: usize = 256;

/// Connections for calls to one server, at most (one per thread that
/// calls it: the gateway's serving threads, or a multi-thread runtime's
/// workers); past it a call goes on the first connection.
const MAX_CALL_CONNECTIONS: usize = 32;

/// See the module doc.
#[derive(Debug)]
pub struct Upstream {
    spec: ServerSpec,
    relay: Relay,
    conn: Mutex<Option<Conn>>,
    /// The connections for calls, each of the thread that opened it.
    here: std::sync::Mutex<Vec<Here>>,
    /// Held while a connection for calls is opened (one at a time).
    opening: Mutex<()>,
    /// After a failed connect, not before this: a server that is down
    /// costs a listing nothing, not its connect timeout every time.
    retry_at: std::sync::Mutex<Option<Instant>>,
}

/// How long a server that could not be reached is left alone.
const DOWN_FOR: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Conn {
    service: RunningService<RoleClient, Relay>,
    lists: Lists,
}

/// A connection for the calls of one thread.
#[derive(Debug)]
struct Here {
    thread: std::thread::ThreadId,
    service: RunningService<RoleClient, Relay>,
}

/// What the server offers, as last listed.
#[derive(Debug, Default)]
struct Lists {
    tools: Option<Arc<Vec<Tool>>>,
    resources: Option<Arc<Vec<Resource>>>,
    templates: Option<Arc<Vec<ResourceTemplate>>>,
    prompts: Option<Arc<Vec<Prompt>>>,
}

impl Upstream {
    /// An upstream of `spec`, not connected yet.
    pub fn new(spec: ServerSpec) -> Self {
        Upstream::in_hub(spec, 0, Arc::default())
    }

    /// An upstream of `spec`, server `index` of a hub whose sessions
    /// hear of its changes through `listeners`.
    pub(crate) fn in_hub(spec: ServerSpec, index: usize, listeners: Arc<Listeners>) -> Self {
        let relay = Relay::announcing(index, spec.name.as_str().into(), listeners);
        Upstream {
            spec,
            relay,
            conn: Mutex::new(None),
            here: std::sync::Mutex::new(Vec::new()),
            opening: Mutex::new(()),
            retry_at: std::sync::Mutex::new(None),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Its peer, connecting first when there is no open connection.
    ///
    /// # Errors
    /// [`UpstreamError::Unavailable`] when it cannot be reached in time.
    pub async fn peer(&self) -> Result<Peer<RoleClient>, UpstreamError> {
        let mut conn = self.conn.lock().await;
        Ok(self.open(&mut conn).await?.service.peer().clone())
    }

    async fn open<'a>(&self, conn: &'a mut Option<Conn>) -> Result<&'a mut Conn, UpstreamError> {
        if conn.as_ref().is_some_and(|c| c.service.is_closed()) {
            tracing::info!(server = %self.spec.name, "mcp: upstream connection closed; reconnecting");
            *conn = None;
        }
        if conn.is_none() {
            let service = self.connect_checked(self.relay.clone()).await?;
            tracing::info!(server = %self.spec.name, "mcp: upstream connected");
            *conn = Some(Conn {
                service,
                lists: Lists::default(),
            });
        }
        conn.as_mut()
            .ok_or_else(|| UpstreamError::Unavailable("no connection".into()))
    }

    /// A new connection whose notifications `relay` handles, unless the
    /// server was found down a moment ago; bounded by the connect timeout.
    async fn connect_checked(
        &self,
        relay: Relay,
    ) -> Result<RunningService<RoleClient, Relay>, UpstreamError> {
        let down = self.retry_at.lock().ok().and_then(|r| *r);
        if let Some(at) = down
            && Instant::now() < at
        {
            return Err(UpstreamError::Unavailable(format!(
                "MCP server {:?} could not be reached; trying again in {} ms",
                self.spec.name,
                at.saturating_duration_since(Instant::now()).as_millis()
            )));
        }
        let connected = tokio::time::timeout(self.spec.connect_timeout, self.connect(relay))
            .await
            .map_err(|_| {
                UpstreamError::Unavailable(format!(
                    "MCP server {:?} did not answer `initialize` within {} ms",
                    self.spec.name,
                    self.spec.connect_timeout.as_millis()
                ))
            })
            .and_then(|r| r);
        if let Err(e) = &connected {
            tracing::warn!(server = %self.spec.name, error = %e, "mcp: upstream unavailable");
            if let Ok(mut r) = self.retry_at.lock() {
                *r = Some(Instant::now() + DOWN_FOR);
            }
        }
        connected
    }

    /// The peer and relay of this thread's connection for calls, opened
    /// first when there is none; the first connection's for a child
    /// process (one process serves every call) or past
    /// [`MAX_CALL_CONNECTIONS`].
    async fn here(&self) -> Result<(Peer<RoleClient>, Relay), UpstreamError> {
        let main = || async { Ok((self.peer().await?, self.relay.clone())) };
        if !matches!(self.spec.transport, Transport::Http { .. }) {
            return main().await;
        }
        let thread = std::thread::current().id();
        if let Some(found) = self.found_here(thread) {
            return Ok(found);
        }
        let _opening = self.opening.lock().await;
        if let Some(found) = self.found_here(thread) {
            return Ok(found);
        }
        let full = self.here.lock().map_or(true, |mut here| {
            here.retain(|h| !h.service.is_closed());
            here.len() >= MAX_CALL_CONNECTIONS
        });
        if full {
            return main().await;
        }
        let relay = self.relay.for_calls();
        let service = self.connect_checked(relay.clone()).await?;
        let peer = service.peer().clone();
        if let Ok(mut here) = self.here.lock() {
            here.push(Here { thread, service });
        }
        Ok((peer, relay))
    }

    /// This thread's open connection for calls, if it has one.
    fn found_here(&self, thread: std::thread::ThreadId) -> Option<(Peer<RoleClient>, Relay)> {
        let here = self.here.lock().ok()?;
        let h = here
            .iter()
            .find(|h| h.thread == thread && !h.service.is_closed())?;
        Some((h.service.peer().clone(), h.service.service().clone()))
    }

    async fn connect(
        &self,
        relay: Relay,
    ) -> Result<RunningService<RoleClient, Relay>, UpstreamError> {
        let unavailable = |e: &dyn std::fmt::Display| {
            UpstreamError::Unavailable(format!("MCP server {:?}: {e}", self.spec.name))
        };
        match &self.spec.transport {
            Transport::Http { url, headers } => {
                let headers: HashMap<_, _> = headers.iter().cloned().collect();
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers)
                    .max_concurrent_requests(MAX_CONCURRENT);
                let client = http_client().map_err(|e| unavailable(&e))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let transport = Counted::new(transport, relay.clone());
                relay.serve(transport).await.map_err(|e| unavailable(&e))
            }
            Transport::Stdio { program, args, env } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
                let transport = TokioChildProcess::new(command).map_err(|e| unavailable(&e))?;
                let transport = Counted::new(transport, relay.clone());
                relay.serve(transport).await.map_err(|e| unavailable(&e))
            }
        }
    }

    /// Its tools, read once and again after it says they changed.
    ///
    /// # Errors
    /// It cannot be reached, or its `tools/list` failed.
    pub async fn tools(&self) -> Result<Arc<Vec<Tool>>, UpstreamError> {
        self.listed(
            List::Tools,
            |l| &mut l.tools,
            |c| c.tools.is_some(),
            |p| async move { p.list_all_tools().await },
        )
        .await
    }

    /// Its tools as last listed, when that list is still current (the
    /// connection open, no change announced), without waiting: `None`
    /// when they must be listed again or the connection is busy.
    pub(crate) fn tools_now(&self) -> Option<Arc<Vec<Tool>>> {
        let guard = self.conn.try_lock().ok()?;
        let conn = guard.as_ref()?;
        if conn.service.is_closed() || self.relay.is_stale(List::Tools) {
            return None;
        }
        conn.lists.tools.clone()
    }

    /// Its resources (none when it offers no resources).
    ///
    /// # Errors
    /// It cannot be reached, or its `resources/list` failed.
    pub async fn resources(&self) -> Result<Arc<Vec<Resource>>, UpstreamError> {
        self.listed(
            List::Resources,
            |l| &mut l.resources,
            |c| c.resources.is_some(),
            |p| async move { p.list_all_resources().await },
        )
        .await
    }

    /// Its resource templates (none when it offers no resources).
    ///
    /// # Errors
    /// It cannot be reached, or its `resources/templates/list` failed.
    pub async fn resource_templates(&self) -> Result<Arc<Vec<ResourceTemplate>>, UpstreamError> {
        self.listed(
            List::Templates,
            |l| &mut l.templates,
            |c| c.resources.is_some(),
            |p| async move { p.list_all_resource_templates().await },
        )
        .await
    }

    /// Its prompts (none when it offers no prompts).
    ///
    /// # Errors
    /// It cannot be reached, or its `prompts/list` failed.
    pub async fn prompts(&self) -> Result<Arc<Vec<Prompt>>, UpstreamError> {
        self.listed(
            List::Prompts,
            |l| &mut l.prompts,
            |c| c.prompts.is_some(),
            |p| async move { p.list_all_prompts().await },
        )
        .await
    }

    /// The `list` kept in `slot`, read again when the server said it
    /// changed; empty without asking when the server's capabilities do
    /// not include it (`offered`).
    async fn listed<T, F, Fut>(
        &self,
        list: List,
        slot: fn(&mut Lists) -> &mut Option<Arc<Vec<T>>>,
        offered: fn(&ServerCapabilities) -> bool,
        fetch: F,
    ) -> Result<Arc<Vec<T>>, UpstreamError>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<Vec<T>, ServiceError>>,
    {
        let mut guard = self.conn.lock().await;
        let conn = self.open(&mut guard).await?;
        if let Some(items) = slot(&mut conn.lists)
            && !self.relay.is_stale(list)
        {
            return Ok(Arc::clone(items));
        }
        self.relay.listed(list);
        let peer = conn.service.peer().clone();
        let mut items = if peer.peer_info().is_some_and(|i| offered(&i.capabilities)) {
            fetch(peer).await.map_err(UpstreamError::from_service)?
        } else {
            Vec::new()
        };
        if items.len() > MAX_TOOLS_PER_SERVER {
            tracing::warn!(server = %self.spec.name, list = ?list, offered = items.len(), "mcp: only the first {MAX_TOOLS_PER_SERVER} are listed");
            items.truncate(MAX_TOOLS_PER_SERVER);
        }
        let items = Arc::new(items);
        *slot(&mut conn.lists) = Some(Arc::clone(&items));
        Ok(items)
    }

    /// One `tools/call`, bounded by `timeout`; progress the server reports
    /// goes to `progress` (the client's peer and token) while it runs. A
    /// call dropped or timed out is cancelled upstream.
    ///
    /// # Errors
    /// See [`UpstreamError`].
    pub async fn call(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Result<CallToolResult, UpstreamError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        match self.request(request, timeout, progress).await? {
            ServerResult::CallToolResult(r) => Ok(r),
            other => Err(unexpected("tools/call", &other)),
        }
    }

    /// One request of any kind (`resources/read`, `prompts/get`, …) and
    /// the server's answer as it gave it, bounded by `timeout`; progress
    /// and cancellation as for [`Upstream::call`]. It goes on this
    /// thread's connection (see the module doc).
    ///
    /// # Errors
    /// See [`UpstreamError`].
    pub async fn request(
        &self,
        request: ClientRequest,
        timeout: Duration,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Result<ServerResult, UpstreamError> {
        let (peer, relay) = self.here().await?;
        send(peer, &relay, request, timeout, progress).await
    }

    /// [`Upstream::request`] on the first connection, whose notifications
    /// the clients' sessions hear: `resources/subscribe` and
    /// `resources/unsubscribe`.
    ///
    /// # Errors
    /// See [`UpstreamError`].
    pub async fn request_listened(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, UpstreamError> {
        let peer = self.peer().await?;
        send(peer, &self.relay, request, timeout, None).await
    }

    /// Closes the connections (a child process is ended).
    pub async fn close(&self) {
        let here = self.here.lock().map(|mut h| std::mem::take(&mut *h));
        for h in here.unwrap_or_default() {
            let _ = h.service.cancel().await;
        }
        if let Some(conn) = self.conn.lock().await.take() {
            let _ = conn.service.cancel().await;
        }
    }
}

/// `request` on the connection of `peer`, whose notifications `relay`
/// handles; see [`Upstream::request`].
async fn send(
    peer: Peer<RoleClient>,
    relay: &Relay,
    request: ClientRequest,
    timeout: Duration,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
) -> Result<ServerResult, UpstreamError> {
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(UpstreamError::from_service)?;
    let handle_token = handle.progress_token.clone();
    let route = match progress {
        Some((to, token)) => relay.route(&handle_token, to, token).await,
        None => None,
    };
    let mut cancel = CancelOnDrop {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let answer = tokio::time::timeout(timeout, handle.await_response())
        .await
        .map_err(|_| UpstreamError::Timeout)?;
    cancel.id = None;
    if route.is_some() {
        // Progress sent before the answer reaches the client first.
        relay.settle(&handle_token).await;
    }
    drop(route);
    answer.map_err(UpstreamError::from_service)
}

/// The HTTP client of one upstream connection: its connections kept
/// open between calls (at most [`MAX_IDLE`] idle, each for [`IDLE_FOR`]),
/// `TCP_NODELAY`, and the SDK's own redirect rule.
///
/// The SDK's default client keeps no idle connection
/// (`pool_max_idle_per_host(0)`, against a delayed-ACK stall when an
/// answer's body was not read to its end; `TCP_NODELAY` avoids that stall,
/// and a connection whose answer was not read to its end is closed, never
/// reused): every call opened a TCP connection (for an `https` server,
/// a TLS handshake too) and closed it after the answer.
fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(MAX_IDLE)
        .pool_idle_timeout(IDLE_FOR)
        .redirect(same_origin_redirects())
        .build()
}

/// Idle connections one upstream connection keeps to its server, at most
/// (calls in flight at once beyond it open connections that are closed
/// after their answer).
const MAX_IDLE: usize = 8;

/// How long an idle connection to a server is kept.
const IDLE_FOR: Duration = Duration::from_secs(60);

/// Redirects followed, at most.
const MAX_REDIRECTS: usize = 10;

/// The SDK's rule for its default client (which it does not export):
/// only a 307 or 308 to the same origin is followed (they keep the method
/// and the body; a 301–303 would turn the POST into a GET, and another
/// origin would get the server's credentials), at most
/// [`MAX_REDIRECTS`] in a row; any other redirect is the answer.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = (attempt.previous().first())
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// The error of an answer of the wrong kind to `method`, naming what it
/// held.
pub(crate) fn unexpected(method: &str, answer: &ServerResult) -> UpstreamError {
    let held = serde_json::to_value(answer)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        })
        .unwrap_or_default();
    UpstreamError::Transport(format!("the MCP server answered {method} with {{{held}}}"))
}

/// Cancels an upstream request that is given up before its answer (the
/// client cancelled, the call timed out).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let param = CancelledNotificationParam::new(
            Some(id),
            Some("cancelled by the gateway's client".into()),
        );
        tokio::spawn(async move {
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::JsonObject;
    use sluice_sim::{Sim, SimConfig};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A TCP relay on 127.0.0.1 in front of `to` that counts the
    /// connections it accepts.
    async fn counting_relay(to: std::net::SocketAddr) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        (format!("http://{addr}/mcp"), accepted)
    }

    #[tokio::test]
    async fn calls_reuse_the_connection_to_an_http_server() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let local = "127.0.0.1:0".parse().expect("an address");
        let sim = Sim::start(SimConfig::unlimited(), local)
            .await
            .expect("the sim");
        let (url, accepted) = counting_relay(sim.addr()).await;
        let upstream = Upstream::new(ServerSpec {
            name: "sim".into(),
            transport: Transport::Http {
                url,
                headers: vec![],
            },
            connect_timeout: Duration::from_secs(10),
        });
        let args: JsonObject = serde_json::json!({"channel": "C1", "text": "hi"})
            .as_object()
            .cloned()
            .expect("an object");
        let call = || CallToolRequestParams::new("SLACK_SEND_MESSAGE").with_arguments(args.clone());
        let first =
            (upstream.call(call(), Duration::from_secs(10), None).await).expect("the first call");
        assert_eq!(first.is_error, Some(false), "{first:?}");
        let before = accepted.load(Ordering::SeqCst);
        const CALLS: usize = 10;
        for _ in 0..CALLS {
            // A moment for the last answer's connection to go back to the
            // pool (its stream is read to its end after the answer is
            // passed on); with the SDK's default client every call opens a
            // connection whatever the wait.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let r = (upstream.call(call(), Duration::from_secs(10), None).await).expect("a call");
            assert_eq!(r.is_error, Some(false), "{r:?}");
        }
        let opened = accepted.load(Ordering::SeqCst) - before;
        assert!(
            opened < CALLS / 2,
            "{CALLS} calls opened {opened} connections: each should reuse one kept open"
        );
        upstream.close().await;
    }
}
