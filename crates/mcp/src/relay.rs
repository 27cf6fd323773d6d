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
//!
//! The SDK hands each notification to a task of its own and each answer
//! to its caller at once, so progress the server sent before its answer
//! may be handled after it, or before the call's route exists. So a
//! progress with no route yet is kept a moment ([`EARLY_FOR`]) for the
//! route about to be made, and a call that got its answer first lets the
//! progress already received be passed on ([`Relay::settle`]): the client
//! sees every progress before the answer, in order.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, NumberOrString, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RoleServer};

/// Calls with progress routed at once per upstream connection; past it a
/// call runs without progress (never refused for it).
const MAX_ROUTES: usize = 4_096;

/// How long a progress that came before its call's route is kept for it.
const EARLY_FOR: Duration = Duration::from_secs(2);

/// Progress kept for routes not made yet, at most (the oldest go first).
const MAX_EARLY: usize = 256;

/// How long a call that got its answer waits, at most, for progress that
/// was received before it to be passed on.
const SETTLE_FOR: Duration = Duration::from_millis(50);

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
    /// Progress for a token with no route yet, oldest first.
    early: Mutex<VecDeque<(Instant, ProgressNotificationParam)>>,
    /// Progress notifications being handled now.
    handling: AtomicUsize,
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
    /// `None` when too many calls are routed already. Progress that came
    /// for it before is passed on first.
    pub(crate) async fn route(
        &self,
        upstream: &ProgressToken,
        peer: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Option<ProgressRoute> {
        {
            let mut routes = self.inner.routes.lock().ok()?;
            if routes.len() >= MAX_ROUTES {
                return None;
            }
            routes.insert(upstream.0.clone(), (peer.clone(), token.clone()));
        }
        let early: Vec<ProgressNotificationParam> = match self.inner.early.lock() {
            Ok(mut q) => {
                let (mine, rest) = q
                    .drain(..)
                    .partition(|(_, p)| p.progress_token == *upstream);
                *q = rest;
                mine.into_iter().map(|(_, p)| p).collect()
            }
            Err(_) => Vec::new(),
        };
        for p in early {
            forward(&peer, &token, p).await;
        }
        Some(ProgressRoute {
            inner: Arc::clone(&self.inner),
            key: upstream.0.clone(),
        })
    }

    /// After a call's answer: lets the progress notifications received
    /// before it be passed on first (they run on tasks of their own),
    /// waiting at most [`SETTLE_FOR`].
    pub(crate) async fn settle(&self) {
        let end = Instant::now() + SETTLE_FOR;
        // The notifications' tasks were spawned before the answer came:
        // yielding lets them start, the count says when they are done.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        while self.inner.handling.load(Ordering::Acquire) > 0 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Passes `p` on to `peer` under the client's `token`.
async fn forward(peer: &Peer<RoleServer>, token: &ProgressToken, mut p: ProgressNotificationParam) {
    p.progress_token = token.clone();
    if let Err(e) = peer.notify_progress(p).await {
        tracing::debug!(error = %e, "mcp: progress not passed on");
    }
}

/// Counts a notification being handled while it lives.
struct Handling<'a>(&'a AtomicUsize);

impl<'a> Handling<'a> {
    fn new(n: &'a AtomicUsize) -> Handling<'a> {
        n.fetch_add(1, Ordering::AcqRel);
        Handling(n)
    }
}

impl Drop for Handling<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
        let _handling = Handling::new(&self.inner.handling);
        let found =
            (self.inner.routes.lock().ok()).and_then(|r| r.get(&params.progress_token.0).cloned());
        match found {
            Some((peer, token)) => forward(&peer, &token, params).await,
            None => {
                // Its call may not have made its route yet: kept a moment.
                if let Ok(mut q) = self.inner.early.lock() {
                    let now = Instant::now();
                    while q.front().is_some_and(|(at, _)| now - *at > EARLY_FOR) {
                        q.pop_front();
                    }
                    if q.len() >= MAX_EARLY {
                        q.pop_front();
                    }
                    q.push_back((now, params));
                }
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
