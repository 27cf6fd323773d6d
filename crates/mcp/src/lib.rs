//! Sluice's MCP gateway: upstream MCP servers behind one Streamable HTTP
//! endpoint, every tool call through the caller's [`Gate`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use sluice_mcp::{Hub, ServerSpec, Transport};
//!
//! let hub = Hub::new(vec![ServerSpec {
//!     name: "sim".into(),
//!     transport: Transport::Http { url: "http://127.0.0.1:9000/mcp".into(), headers: vec![] },
//!     connect_timeout: Duration::from_secs(10),
//! }]);
//! assert_eq!(hub.servers()[0].name(), "sim");
//! // sluice_mcp::service(Arc::new(hub), Arc::new(my_gate), config) is the
//! // tower service an HTTP router mounts at `/mcp`.
//! ```
//!
//! - [`Upstream`]: one server, over Streamable HTTP or a child process's
//!   stdio, connected on first use and again after it goes away.
//! - [`Catalog`]: one name per tool (and prompt) across servers
//!   (`{server}.{tool}` on a collision); [`Resources`]: which server a
//!   resource URI is read from.
//! - [`Gate`]: the gateway's part (who asks, what they may see, how a
//!   call goes through admission, limits and the ledger); this crate
//!   knows nothing of those.
//! - [`Front`]: the MCP server clients talk to: tools, resources and
//!   prompts of every server, progress and cancellation passed through.
//! - [`rate_limit_of`]: a tool result that says its API refused for its
//!   rate.
#![warn(missing_docs)]

mod catalog;
mod error;
mod front;
mod gate;
mod listeners;
mod relay;
mod signals;
mod spec;
mod upstream;

use std::future::Future;
use std::sync::Arc;

use rmcp::model::Prompt;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

pub use catalog::{Catalog, Entry, Listed, ListedResources, Named, Resources};
pub use error::UpstreamError;
pub use front::{Front, POLICY_DENIED, RATE_LIMITED};
pub use gate::{Attempt, Gate, Pass, Read, ReadKind, ToolCall};
pub use signals::{RateLimited, rate_limit_of};
pub use spec::{ServerSpec, Transport};
pub use upstream::{MAX_TOOLS_PER_SERVER, Upstream};

/// Every upstream server, in configuration order.
#[derive(Debug)]
pub struct Hub {
    servers: Vec<Arc<Upstream>>,
    /// The clients' sessions that hear of the servers' changes.
    listeners: Arc<listeners::Listeners>,
    /// The last catalog of tools and the lists it was built from: a
    /// call finds its tool there while every list is current, without a
    /// listing or a rebuild.
    tools: std::sync::Mutex<Option<(Vec<Listed>, Arc<Catalog>)>>,
}

impl Hub {
    /// A hub of `specs`, none connected yet.
    pub fn new(specs: Vec<ServerSpec>) -> Self {
        let listeners = Arc::new(listeners::Listeners::default());
        Hub {
            servers: specs
                .into_iter()
                .enumerate()
                .map(|(i, s)| Arc::new(Upstream::in_hub(s, i, Arc::clone(&listeners))))
                .collect(),
            listeners,
            tools: std::sync::Mutex::new(None),
        }
    }

    /// Its servers.
    pub fn servers(&self) -> &[Arc<Upstream>] {
        &self.servers
    }

    pub(crate) fn listeners(&self) -> &listeners::Listeners {
        &self.listeners
    }

    /// Connects every server and reads its tools, so that the first
    /// client does not wait for them; a server that cannot be reached is
    /// logged and tried again on use.
    pub async fn warm(&self) {
        let _ = self.catalog().await;
    }

    /// The tools of every server that answers, named once. A server that
    /// cannot be reached is left out (logged) until it can.
    pub async fn catalog(&self) -> Arc<Catalog> {
        if let Some(catalog) = self.catalog_now() {
            return catalog;
        }
        let listed = list_all(&self.servers, "tools", |s| async move { s.tools().await }).await;
        let Ok(mut cache) = self.tools.lock() else {
            return Arc::new(Catalog::build(&listed));
        };
        if let Some((was, catalog)) = cache.as_ref()
            && same_lists(was, &listed)
        {
            return Arc::clone(catalog);
        }
        let catalog = Arc::new(Catalog::build(&listed));
        *cache = Some((listed, Arc::clone(&catalog)));
        catalog
    }

    /// The cached catalog, when every server's tools were listed into it
    /// and are still current.
    fn catalog_now(&self) -> Option<Arc<Catalog>> {
        let cache = self.tools.lock().ok()?;
        let (listed, catalog) = cache.as_ref()?;
        if listed.len() != self.servers.len() {
            return None;
        }
        for ((_, _, items), server) in listed.iter().zip(&self.servers) {
            if !Arc::ptr_eq(&server.tools_now()?, items) {
                return None;
            }
        }
        Some(Arc::clone(catalog))
    }

    /// The prompts of every server that answers, named once (as tools
    /// are).
    pub async fn prompts(&self) -> Catalog<Prompt> {
        let listed = list_all(
            &self.servers,
            "prompts",
            |s| async move { s.prompts().await },
        )
        .await;
        Catalog::build(&listed)
    }

    /// The resources and resource templates of every server that answers.
    pub async fn resources(&self) -> Resources {
        let listed = list_all(&self.servers, "resources", |s| async move {
            Ok((s.resources().await?, s.resource_templates().await?))
        })
        .await;
        let listed: Vec<ListedResources> = listed
            .into_iter()
            .map(|(i, name, (r, t))| (i, name, r, t))
            .collect();
        Resources::build(&listed)
    }

    /// Closes every connection (child processes end).
    pub async fn close(&self) {
        for s in &self.servers {
            s.close().await;
        }
    }
}

/// Whether `a` and `b` are the same servers' same lists (not copies).
fn same_lists<T>(a: &[Listed<T>], b: &[Listed<T>]) -> bool {
    a.len() == b.len()
        && (a.iter().zip(b)).all(|((i, _, x), (j, _, y))| i == j && Arc::ptr_eq(x, y))
}

/// `list` of every server at once, in server order; a server whose
/// listing failed is left out (logged).
async fn list_all<T, F, Fut>(
    servers: &[Arc<Upstream>],
    what: &'static str,
    list: F,
) -> Vec<(usize, Arc<str>, T)>
where
    T: Send + 'static,
    F: Fn(Arc<Upstream>) -> Fut,
    Fut: Future<Output = Result<T, UpstreamError>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    for (i, s) in servers.iter().enumerate() {
        let name: Arc<str> = s.name().into();
        let listing = list(Arc::clone(s));
        tasks.spawn(async move { (i, name, listing.await) });
    }
    let mut out = Vec::with_capacity(servers.len());
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, name, Ok(items))) => out.push((i, name, items)),
            Ok((_, name, Err(e))) => {
                tracing::warn!(server = %name, error = %e, "mcp: {what} not listed");
            }
            Err(e) => tracing::warn!(error = %e, "mcp: listing {what} failed"),
        }
    }
    out.sort_by_key(|(i, _, _)| *i);
    out
}

/// The Streamable HTTP service of `hub` through `gate`, to mount at
/// `/mcp`: a session per client (`Mcp-Session-Id`), kept in the service
/// across requests, SSE answers and notifications, sessions ended when
/// `config.cancellation_token` is. A request's own state (who asks)
/// reaches the gate in the request's extensions, so one service serves
/// every request.
pub fn service<G: Gate>(
    hub: Arc<Hub>,
    gate: Arc<G>,
    config: StreamableHttpServerConfig,
) -> StreamableHttpService<Front<G>, LocalSessionManager> {
    let front = Front::new(hub, gate);
    let sessions = Arc::new(LocalSessionManager::default());
    StreamableHttpService::new(move || Ok(front.for_session()), sessions, config)
}

/// The server-side configuration type of [`service`].
pub use rmcp::transport::streamable_http_server::StreamableHttpServerConfig as ServiceConfig;

/// The SDK's Streamable HTTP service [`service`] makes.
pub use rmcp::transport::streamable_http_server::StreamableHttpService;

/// The SDK's in-memory sessions, which [`service`] keeps.
pub mod rmcp_session {
    pub use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
}
