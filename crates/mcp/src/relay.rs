//! [`Relay`], the gateway's side of each upstream connection: progress
//! notifications passed back to the client whose request they belong to,
//! and a changed list (tools, resources, prompts) noted so that the next
//! listing asks again.
//!
//! The SDK gives every upstream request a progress token of its own (a
//! number unique on that connection); while a call runs, that token maps
//! back to the client's peer and the client's token ([`ProgressRoute`]
//! removes it when dropped), so two clients that picked the same token
//! never see each other's progress.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// A list an upstream offers, cached until it says it changed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum List {
    Tools = 0,
    Resources = 1,
    Templates = 2,
    Prompts = 3,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each [`List`] changed since it was last read.
    stale: [AtomicBool; 4],
    routes: Mutex<HashMap<NumberOrString, (Peer<RoleServer>, ProgressToken)>>,
}

/// A call's progress route, removed when the call ends.
#[derive(Debug)]
pub(crate) struct ProgressRoute {
    inner: Arc<Inner>,
    key: NumberOrString,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.inner.routes.lock() {
            routes.remove(&self.key);
        }
    }
}

impl Relay {
    /// Whether `list` changed since [`Relay::listed`].
    pub(crate) fn is_stale(&self, list: List) -> bool {
        self.inner.stale[list as usize].load(Ordering::Acquire)
    }

    /// `list` was just read.
    pub(crate) fn listed(&self, list: List) {
        self.inner.stale[list as usize].store(false, Ordering::Release);
    }

    fn changed(&self, list: List) {
        self.inner.stale[list as usize].store(true, Ordering::Release);
    }

    /// Routes progress reported under `upstream` (the token the SDK sent
    /// with a call) to `peer` as `token`, until the route is dropped;
    /// `None` when too many calls are routed already.
    pub(crate) fn route(
        &self,
        upstream: &ProgressToken,
        peer: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Option<ProgressRoute> {
        let mut routes = self.inner.routes.lock().ok()?;
        if routes.len() >= MAX_ROUTES {
            return None;
        }
        routes.insert(upstream.0.clone(), (peer, token));
        Some(ProgressRoute {
            inner: Arc::clone(&self.inner),
            key: upstream.0.clone(),
        })
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
        let found =
            (self.inner.routes.lock().ok()).and_then(|r| r.get(&params.progress_token.0).cloned());
        if let Some((peer, token)) = found {
            let mut forwarded = params;
            forwarded.progress_token = token;
            if let Err(e) = peer.notify_progress(forwarded).await {
                tracing::debug!(error = %e, "mcp: progress not passed on");
            }
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Resources);
        self.changed(List::Templates);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Prompts);
    }
}
