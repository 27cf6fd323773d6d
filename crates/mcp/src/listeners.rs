//! [`Listeners`]: the clients' sessions that hear of changes upstream. A
//! server's `notifications/{tools,resources,prompts}/list_changed` is
//! passed on to every open session that may see that server, after the
//! gateway marked its cached list stale (so the list the client asks for
//! next is read again); `notifications/resources/updated` goes to the
//! sessions that subscribed to that URI (`resources/subscribe`) and may
//! still see its server.
//!
//! The server holds one subscription per URI for the gateway's one
//! connection, shared by every session that subscribed: it is asked to
//! subscribe when the first session does and to unsubscribe when the last
//! one does. A session that ends without unsubscribing leaves the
//! upstream subscription in place; its updates then reach no one.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer};

/// Sessions that listen at once, at most; past it the oldest stops
/// hearing of changes (it can still list and call).
const MAX_SESSIONS: usize = 4_096;

/// URIs one session may subscribe to, at most.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 256;

/// How long a notification to one session may take to be handed over.
const SEND_FOR: Duration = Duration::from_secs(5);

/// A change a server announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Tools,
    Resources,
    Prompts,
    /// A resource the server was asked to watch changed.
    Updated(String),
}

/// Whether a session may see the server of this name.
type Sees = Box<dyn Fn(&str) -> bool + Send + Sync>;

struct Listener {
    session: u64,
    peer: Peer<RoleServer>,
    sees: Sees,
    /// `(server index, URI)` it subscribed to.
    subscribed: HashSet<(usize, String)>,
}

/// See the module doc.
#[derive(Default)]
pub(crate) struct Listeners {
    sessions: Mutex<Vec<Listener>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.lock().len();
        f.debug_struct("Listeners").field("sessions", &n).finish()
    }
}

impl Listeners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Listener>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new session's number.
    pub(crate) fn session(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// `session` (of `peer`) hears of changes of the servers `sees`
    /// allows, from now on until it ends.
    pub(crate) fn listen(&self, session: u64, peer: Peer<RoleServer>, sees: Sees) {
        let mut sessions = self.lock();
        sessions.retain(|l| l.session != session && !l.peer.is_transport_closed());
        if sessions.len() >= MAX_SESSIONS {
            tracing::warn!(
                "mcp: {MAX_SESSIONS} sessions listen for changes; the oldest no longer does"
            );
            sessions.remove(0);
        }
        sessions.push(Listener {
            session,
            peer,
            sees,
            subscribed: HashSet::new(),
        });
    }

    /// `session` subscribes to `uri` of server `server`: whether it is
    /// the first session to (the server is to be asked).
    ///
    /// # Errors
    /// The session does not listen (it never sent `initialized`), or has
    /// [`MAX_SUBSCRIPTIONS`] already.
    pub(crate) fn subscribe(&self, session: u64, server: usize, uri: &str) -> Result<bool, String> {
        let mut sessions = self.lock();
        let key = (server, uri.to_owned());
        let first = !sessions.iter().any(|l| l.subscribed.contains(&key));
        let me = (sessions.iter_mut().find(|l| l.session == session)).ok_or_else(|| {
            "resources/subscribe needs a session: initialize first (the 2026-07-28 protocol has no sessions)"
                .to_owned()
        })?;
        if !me.subscribed.contains(&key) && me.subscribed.len() >= MAX_SUBSCRIPTIONS {
            return Err(format!(
                "a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources"
            ));
        }
        me.subscribed.insert(key);
        Ok(first)
    }

    /// `session` unsubscribes from `uri` of `server`: whether no session
    /// is subscribed to it any more (the server is to be told).
    pub(crate) fn unsubscribe(&self, session: u64, server: usize, uri: &str) -> bool {
        let mut sessions = self.lock();
        let key = (server, uri.to_owned());
        let mut had = false;
        if let Some(me) = sessions.iter_mut().find(|l| l.session == session) {
            had = me.subscribed.remove(&key);
        }
        had && !sessions.iter().any(|l| l.subscribed.contains(&key))
    }

    /// Server `server` (named `name`) announced `change`: passed on to
    /// every session it concerns, each on a task of its own.
    pub(crate) fn changed(&self, server: usize, name: &str, change: &Change) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut sessions = self.lock();
            sessions.retain(|l| !l.peer.is_transport_closed());
            sessions
                .iter()
                .filter(|l| match change {
                    Change::Updated(uri) => l.subscribed.contains(&(server, uri.clone())),
                    _ => true,
                })
                .filter(|l| (l.sees)(name))
                .map(|l| l.peer.clone())
                .collect()
        };
        for peer in peers {
            let change = change.clone();
            tokio::spawn(async move {
                let sent = match change {
                    Change::Tools => {
                        tokio::time::timeout(SEND_FOR, peer.notify_tool_list_changed()).await
                    }
                    Change::Resources => {
                        tokio::time::timeout(SEND_FOR, peer.notify_resource_list_changed()).await
                    }
                    Change::Prompts => {
                        tokio::time::timeout(SEND_FOR, peer.notify_prompt_list_changed()).await
                    }
                    Change::Updated(uri) => {
                        let param = ResourceUpdatedNotificationParam::new(uri);
                        tokio::time::timeout(SEND_FOR, peer.notify_resource_updated(param)).await
                    }
                };
                if !matches!(sent, Ok(Ok(()))) {
                    tracing::debug!("mcp: a change was not passed on to a session");
                }
            });
        }
    }
}
