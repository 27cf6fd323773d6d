//! [`Relay`], the gateway's side of each upstream connection: progress
//! notifications passed back to the client whose request they belong to,
//! and a changed list (tools, resources, prompts) noted so that the next
//! listing asks again, then announced to the clients' sessions
//! ([`crate::listeners`]), as is a subscribed resource's update.
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
//! route about to be made, and a call that got its answer waits for the
//! progress of its own token that was received before the answer
//! ([`Relay::settle`]): the client sees every progress before the answer,
//! in order. What was received is counted as the connection reads it
//! ([`Counted`], in the order the server sent it), so a call with no
//! progress pending never waits.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, JsonRpcMessage, NumberOrString,
    ProgressNotificationParam, ProgressToken, ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::service::{
    NotificationContext, Peer, RoleClient, RoleServer, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use tokio::sync::Notify;

use crate::listeners::{Change, Listeners};

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

/// Tokens with progress received and not yet handled, at most; past it
/// progress is not counted (its call does not wait for it).
const MAX_PENDING: usize = 4_096;

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
    /// Each [`List`] changed since it was last read (shared by the
    /// relays of one server's connections: a change heard on any of them
    /// is the server's).
    stale: Arc<[AtomicBool; 4]>,
    routes: Mutex<HashMap<NumberOrString, (Peer<RoleServer>, ProgressToken)>>,
    /// Progress for a token with no route yet, oldest first.
    early: Mutex<VecDeque<(Instant, ProgressNotificationParam)>>,
    /// Per upstream token, progress notifications read from the
    /// connection and not handled yet.
    pending: Mutex<HashMap<NumberOrString, u32>>,
    /// Woken each time a progress notification has been handled.
    handled: Notify,
    /// Its server's index and name in the hub, and the sessions that hear
    /// of its changes (on one connection per server only: every
    /// connection may hear of a change, the sessions hear of it once).
    announce: Option<(usize, Arc<str>, Arc<Listeners>)>,
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
        // What is still pending for it has no one to wait for it.
        if let Ok(mut pending) = self.inner.pending.lock() {
            pending.remove(&self.key);
        }
    }
}

impl Relay {
    /// The relay of server `index` (named `name`), whose changes
    /// `listeners` hear of.
    pub(crate) fn announcing(index: usize, name: Arc<str>, listeners: Arc<Listeners>) -> Self {
        Relay {
            inner: Arc::new(Inner {
                announce: Some((index, name, listeners)),
                ..Inner::default()
            }),
        }
    }

    /// The relay of another connection to the same server, for its calls:
    /// the lists' staleness shared with this one, progress routes of its
    /// own (the SDK's tokens are unique per connection only), changes
    /// announced by this one only.
    pub(crate) fn for_calls(&self) -> Self {
        Relay {
            inner: Arc::new(Inner {
                stale: Arc::clone(&self.inner.stale),
                ..Inner::default()
            }),
        }
    }

    /// Tells the sessions of `change`, after the cached list was marked
    /// stale.
    fn announce(&self, change: &Change) {
        if let Some((index, name, listeners)) = &self.inner.announce {
            listeners.changed(*index, name, change);
        }
    }

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

    /// After a call's answer: lets the progress of `upstream` (its token)
    /// that was received before the answer be passed on first (it is
    /// handled on tasks of its own), waiting at most [`SETTLE_FOR`]. A call
    /// with no progress pending returns at once.
    pub(crate) async fn settle(&self, upstream: &ProgressToken) {
        let end = tokio::time::Instant::now() + SETTLE_FOR;
        loop {
            let handled = self.inner.handled.notified();
            if !self.is_pending(upstream) {
                return;
            }
            if tokio::time::timeout_at(end, handled).await.is_err() {
                return;
            }
        }
    }

    fn is_pending(&self, upstream: &ProgressToken) -> bool {
        (self.inner.pending.lock()).is_ok_and(|p| p.contains_key(&upstream.0))
    }

    /// A progress notification for `upstream` was read from the
    /// connection (before anything the server sent after it).
    fn received(&self, upstream: &ProgressToken) {
        if let Ok(mut pending) = self.inner.pending.lock() {
            if pending.len() >= MAX_PENDING && !pending.contains_key(&upstream.0) {
                return;
            }
            *pending.entry(upstream.0.clone()).or_default() += 1;
        }
    }

    /// A progress notification for `upstream` was passed on (or kept for
    /// its route).
    fn handled(&self, upstream: &ProgressToken) {
        if let Ok(mut pending) = self.inner.pending.lock()
            && let Some(n) = pending.get_mut(&upstream.0)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                pending.remove(&upstream.0);
            }
        }
        self.inner.handled.notify_waiters();
    }
}

/// An upstream connection's transport, each progress notification counted
/// as it is read ([`Relay::settle`]).
pub(crate) struct Counted<T> {
    inner: T,
    relay: Relay,
}

impl<T> Counted<T> {
    pub(crate) fn new(inner: T, relay: Relay) -> Self {
        Counted { inner, relay }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Counted<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(n) = &message
            && let ServerNotification::ProgressNotification(p) = &n.notification
        {
            self.relay.received(&p.params.progress_token);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Passes `p` on to `peer` under the client's `token`.
async fn forward(peer: &Peer<RoleServer>, token: &ProgressToken, mut p: ProgressNotificationParam) {
    p.progress_token = token.clone();
    if let Err(e) = peer.notify_progress(p).await {
        tracing::debug!(error = %e, "mcp: progress not passed on");
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
        let upstream = params.progress_token.clone();
        let found = (self.inner.routes.lock().ok()).and_then(|r| r.get(&upstream.0).cloned());
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
        self.handled(&upstream);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Tools);
        self.announce(&Change::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Resources);
        self.changed(List::Templates);
        self.announce(&Change::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(List::Prompts);
        self.announce(&Change::Prompts);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.announce(&Change::Updated(params.uri));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_with_no_progress_pending_does_not_wait() {
        let relay = Relay::default();
        // Another call's progress is pending: not this one's concern.
        relay.received(&token(2));
        let t0 = Instant::now();
        relay.settle(&token(1)).await;
        assert_eq!(Instant::now(), t0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_its_progress_read_before_its_answer() {
        let relay = Relay::default();
        relay.received(&token(1));
        relay.received(&token(1));
        let t0 = Instant::now();
        let handler = relay.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(3)).await;
            handler.handled(&token(1));
            tokio::time::sleep(Duration::from_millis(4)).await;
            handler.handled(&token(1));
        });
        let mine = token(1);
        let settle = relay.settle(&mine);
        tokio::pin!(settle);
        // Pending while one of the two is not handled yet.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(futures_poll_once(settle.as_mut()).await.is_none());
        settle.await;
        assert_eq!(Instant::now() - t0, Duration::from_millis(7));
        assert!(!relay.is_pending(&token(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn progress_never_handled_holds_its_call_no_longer_than_the_bound() {
        let relay = Relay::default();
        relay.received(&token(1));
        let t0 = Instant::now();
        relay.settle(&token(1)).await;
        assert_eq!(Instant::now() - t0, SETTLE_FOR);
    }

    /// Polls `f` once: `Some` if it was ready.
    async fn futures_poll_once<F: Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
