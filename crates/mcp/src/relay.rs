//! [`Relay`], the gateway's side of each upstream connection: progress
//! notifications passed back to the client whose call they belong to, and
//! a changed tool list noted so that the next listing asks again.
//!
//! Clients pick their progress tokens, and two clients may pick the same
//! one; upstream, every call's token is one of the gateway's own
//! (`sluice-{n}`), mapped back to the client's peer and token while the
//! call runs ([`ProgressRoute`] removes it when dropped).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, NumberOrString, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RoleServer};

/// Calls with progress routed at once per upstream connection; past it a
/// call runs without progress (never refused for it).
const MAX_ROUTES: usize = 4_096;

/// See the module doc.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relay {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The upstream's tool list changed since it was last read.
    stale: AtomicBool,
    next: AtomicU64,
    routes: Mutex<HashMap<String, (Peer<RoleServer>, ProgressToken)>>,
}

/// A call's progress route, removed when the call ends.
#[derive(Debug)]
pub(crate) struct ProgressRoute {
    inner: Arc<Inner>,
    key: String,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.inner.routes.lock() {
            routes.remove(&self.key);
        }
    }
}

impl Relay {
    /// Whether the tool list changed since [`Relay::listed`].
    pub(crate) fn is_stale(&self) -> bool {
        self.inner.stale.load(Ordering::Acquire)
    }

    /// The tool list was just read.
    pub(crate) fn listed(&self) {
        self.inner.stale.store(false, Ordering::Release);
    }

    /// The token to send upstream for a call whose client asked for
    /// progress with `token` on `peer`, and its route; `None` when too
    /// many calls are routed already.
    pub(crate) fn route(
        &self,
        peer: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Option<(ProgressToken, ProgressRoute)> {
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let key = format!("sluice-{n}");
        let mut routes = self.inner.routes.lock().ok()?;
        if routes.len() >= MAX_ROUTES {
            return None;
        }
        routes.insert(key.clone(), (peer, token));
        drop(routes);
        let upstream = ProgressToken(NumberOrString::String(key.clone().into()));
        let route = ProgressRoute {
            inner: Arc::clone(&self.inner),
            key,
        };
        Some((upstream, route))
    }
}

impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("sluice", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let NumberOrString::String(key) = &params.progress_token.0 else {
            return;
        };
        let found = self
            .inner
            .routes
            .lock()
            .ok()
            .and_then(|r| r.get(key.as_ref()).cloned());
        if let Some((peer, token)) = found {
            let mut forwarded = params;
            forwarded.progress_token = token;
            if let Err(e) = peer.notify_progress(forwarded).await {
                tracing::debug!(error = %e, "mcp: progress not passed on");
            }
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.inner.stale.store(true, Ordering::Release);
    }
}
