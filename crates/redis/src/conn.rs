//! The connection to Redis: one multiplexed connection shared by every
//! call (and one more per lane of a thread's own, `lane.rs`), a per-call
//! timeout, and reconnection with backoff while degraded.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::limiter::lock;

/// Longest pause between two reconnection attempts while Redis is away
/// (from 50 ms, doubling). It bounds how long a replica stays degraded
/// after Redis is back: measured 2.1 s with a cap of 2 s, hence 500 ms;
/// a refused connection every half second costs nothing.
pub(crate) const MAX_RECONNECT_BACKOFF: Duration = Duration::from_millis(500);

type Listener = Arc<dyn Fn(bool) + Send + Sync>;

/// What runs once a lost connection is back, before decisions go to
/// Redis again (`handback.rs`): the local shares hand back what they spent.
pub(crate) type HandBack =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

pub(crate) struct Conn {
    client: redis::Client,
    current: RwLock<Option<MultiplexedConnection>>,
    /// Decisions follow the failure mode: from the first failed call until
    /// a new connection answered and the hand-back is done.
    degraded: AtomicBool,
    /// No connection works: from the first failed call until a new one
    /// answers a PING. Calls are refused only while this holds, so that
    /// the hand-back can talk to Redis while decisions are still local.
    down: AtomicBool,
    hand_back: std::sync::OnceLock<HandBack>,
    reconnecting: AtomicBool,
    pub(crate) timeout: Duration,
    listeners: Mutex<Vec<Listener>>,
    pub(crate) closed: AtomicBool,
    /// Counts the connections put in `current`: a lane's own connection
    /// opened before the last one predates an outage and is opened again.
    generation: AtomicU64,
    /// The runtime the limiter was connected on: reconnection runs there,
    /// whichever thread's call failed, so that it outlives any one lane.
    home: tokio::runtime::Handle,
}

/// A lane's own connection (`lane.rs`): opened by the lane's first call on
/// the lane's runtime, so that its I/O task runs there, and again after
/// every reconnection; with the generation of `current` it was opened at.
#[derive(Default)]
pub(crate) struct Own(Mutex<Option<(u64, MultiplexedConnection)>>);

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("degraded", &self.is_degraded())
            .finish_non_exhaustive()
    }
}

/// Redis did not answer in time, or at all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unavailable;

impl Conn {
    /// A connection to `client`, reconnected on the current runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn new(client: redis::Client, timeout: Duration) -> Arc<Conn> {
        Arc::new(Conn {
            client,
            current: RwLock::new(None),
            degraded: AtomicBool::new(true),
            down: AtomicBool::new(true),
            hand_back: std::sync::OnceLock::new(),
            reconnecting: AtomicBool::new(false),
            timeout,
            listeners: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            home: tokio::runtime::Handle::current(),
        })
    }

    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::SeqCst)
    }

    /// Runs `f` after every reconnection, before the replica counts as
    /// shared again (set once).
    pub(crate) fn on_return(&self, f: HandBack) {
        let _ = self.hand_back.set(f);
    }

    pub(crate) fn on_change(&self, f: Listener) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(f);
    }

    fn set_degraded(&self, degraded: bool) {
        if self.degraded.swap(degraded, Ordering::SeqCst) != degraded {
            let listeners = self
                .listeners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            for l in listeners {
                l(degraded);
            }
        }
    }

    /// The connection, unless Redis is known to be down.
    pub(crate) fn get(&self) -> Option<MultiplexedConnection> {
        if self.down.load(Ordering::SeqCst) {
            return None;
        }
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn open(&self) -> redis::RedisResult<MultiplexedConnection> {
        let cfg = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(100))))
            .set_response_timeout(Some(self.timeout));
        let mut c = self
            .client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await?;
        redis::cmd("PING").query_async::<()>(&mut c).await?;
        Ok(c)
    }

    /// Connects once now; on failure stays degraded and keeps trying in
    /// the background.
    pub(crate) async fn start(self: &Arc<Self>) {
        match self.open().await {
            Ok(c) => self.connected(c),
            Err(_) => self.fail(),
        }
    }

    /// `c` answered: it is the connection from now on, and Redis is back.
    fn connected(&self, c: MultiplexedConnection) {
        self.store(c);
        self.set_degraded(false);
    }

    /// `c` answered: calls go through it from now on.
    fn store(&self, c: MultiplexedConnection) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(c);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.down.store(false, Ordering::SeqCst);
    }

    /// The connection of the lane `own`, opened on this runtime unless it
    /// was already since the last reconnection; none while Redis is known
    /// to be down, or when it cannot be opened (which degrades).
    async fn own(self: &Arc<Self>, own: &Own) -> Option<MultiplexedConnection> {
        if self.down.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst) {
            return None;
        }
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some((opened, c)) = &*lock(&own.0)
            && *opened == generation
        {
            return Some(c.clone());
        }
        // Two calls may open one each at a lane's start; the later stays.
        match self.open().await {
            Ok(c) => {
                *lock(&own.0) = Some((generation, c.clone()));
                Some(c)
            }
            Err(_) => {
                self.fail();
                None
            }
        }
    }

    /// A call failed or timed out: Redis counts as down until a new
    /// connection answers a PING. Later calls fail fast instead of each
    /// waiting out the timeout.
    pub(crate) fn fail(self: &Arc<Self>) {
        self.down.store(true, Ordering::SeqCst);
        self.set_degraded(true);
        if self.closed.load(Ordering::SeqCst) || self.reconnecting.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<Conn> = Arc::downgrade(self);
        self.home.spawn(async move {
            let mut backoff = Duration::from_millis(50);
            loop {
                tokio::time::sleep(backoff).await;
                let Some(mut conn) = weak.upgrade() else {
                    return;
                };
                if conn.closed.load(Ordering::SeqCst) {
                    conn.reconnecting.store(false, Ordering::SeqCst);
                    return;
                }
                if let Ok(c) = conn.open().await {
                    conn.store(c);
                    // Still degraded: decisions stay on the local shares
                    // until they have handed back what they spent.
                    let hand_back = conn.hand_back.get().cloned();
                    if let Some(f) = hand_back {
                        drop(conn);
                        f().await;
                        let Some(c) = weak.upgrade() else { return };
                        conn = c;
                    }
                    // A call of the hand-back failed: Redis went again.
                    if !conn.down.load(Ordering::SeqCst) {
                        conn.reconnecting.store(false, Ordering::SeqCst);
                        conn.set_degraded(false);
                        return;
                    }
                }
                backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
            }
        });
    }

    /// Runs one call under the timeout; any failure degrades.
    pub(crate) async fn call<T, F, Fut>(self: &Arc<Self>, f: F) -> Result<T, Unavailable>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.call_on(None, f).await
    }

    /// [`Conn::call`] on the lane `own`'s connection, or the shared one.
    pub(crate) async fn call_on<T, F, Fut>(
        self: &Arc<Self>,
        own: Option<&Own>,
        f: F,
    ) -> Result<T, Unavailable>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let c = match own {
            Some(own) => self.own(own).await,
            None => self.get(),
        };
        let Some(c) = c else {
            return Err(Unavailable);
        };
        match tokio::time::timeout(self.timeout, f(c)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if !is_connection_error(&e) => {
                // A script error is a bug of ours, not an outage; still
                // never a panic: the caller treats it as Redis unavailable.
                debug_error(&e);
                Err(Unavailable)
            }
            _ => {
                self.fail();
                Err(Unavailable)
            }
        }
    }
}

fn is_connection_error(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

fn debug_error(e: &redis::RedisError) {
    tracing::warn!(error = %e, "redis answered an error");
}
