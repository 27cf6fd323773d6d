//! [`RedisLimiter`]: limits shared by every replica through Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sluice_limit::{AdaptiveConfig, CapacityChange, Limit, Limiter, Rules};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::batch::{Header, Op, Spec};
use crate::bus::CapacityUpdate;
use crate::config::{Keys, Mode, RedisConfig};
use crate::conn::Conn;
use crate::leased::Blocks;

mod acquire;
mod attempt;
mod capacity;
mod inner;
mod line;
mod set;
mod throttle;

use acquire::Waitq;
pub(crate) use attempt::Refusal;
pub(crate) use capacity::{share, share_limit};
use inner::spawn_renewal;
pub use set::MAX_SET_LIMITS;

type ChangeListener = Arc<dyn Fn(&CapacityChange) + Send + Sync>;
type UpdateListener = Arc<dyn Fn(&CapacityUpdate) + Send + Sync>;
type Weigher = Arc<dyn Fn(&str) -> u64 + Send + Sync>;

/// Rate limits shared by every gateway replica through Redis.
///
/// Cheap to clone: clones share everything. Background tasks (batching,
/// the capacity bus, heartbeats, lease renewal) stop when the last clone
/// and the last grant are dropped, or at [`RedisLimiter::close`].
#[derive(Clone)]
pub struct RedisLimiter {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("replica", &self.inner.cfg.replica_id)
            .field("mode", &self.inner.cfg.mode)
            .field("degraded", &self.is_degraded())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) cfg: RedisConfig,
    pub(crate) keys: Keys,
    pub(crate) rules: Rules,
    pub(crate) adaptive: AdaptiveConfig,
    pub(crate) conn: Arc<Conn>,
    /// The limiter's own lane (`lane.rs`): its batcher runs on the runtime
    /// `connect` ran on.
    pub(crate) ops: mpsc::Sender<Op>,
    /// What every script call carries: for the lanes threads start.
    pub(crate) header: Arc<Header>,
    specs: Mutex<HashMap<String, Arc<Spec>>>,
    /// Limits set at run time ([`RedisLimiter::set_limit`]), ahead of the
    /// rules.
    pub(crate) overrides: Mutex<HashMap<String, Limit>>,
    deny: Mutex<HashMap<String, (Instant, u64)>>,
    /// 429s in a row per resource, and when the last one was seen (the
    /// evidence policy; see [`RedisLimiter::observe`]).
    strikes: Mutex<HashMap<String, (u32, Instant)>>,
    queues: Mutex<HashMap<String, Arc<Waitq>>>,
    /// Head waiters refused on a resource other than their line's: woken
    /// by that resource's release notices too.
    interest: Mutex<HashMap<String, Vec<Arc<Waitq>>>>,
    pub(crate) blocks: Blocks,
    held: Mutex<HashMap<String, Arc<Spec>>>,
    pub(crate) local: Limiter,
    pub(crate) replicas: AtomicU64,
    listeners: Mutex<Vec<ChangeListener>>,
    update_listeners: Mutex<Vec<UpdateListener>>,
    pub(crate) notice_listeners: Mutex<Vec<crate::notice::NoticeListener>>,
    seq: AtomicU64,
    pub(crate) closed: AtomicBool,
    /// Background tasks, threads' lanes included: aborted at close.
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Operations dropped because the queue to Redis was full.
    pub(crate) dropped_ops: AtomicU64,
    /// This replica's weight on a resource ([`RedisLimiter::weigh_by`]).
    weigher: std::sync::RwLock<Option<Weigher>>,
    /// Set once a collision widened some resource's margin
    /// ([`Inner::sync_margin`]): until then a clean answer touches no map.
    pub(crate) margins_widened: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.conn.closed.store(true, Ordering::SeqCst);
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The largest weight a replica claims on a resource
/// ([`RedisLimiter::weigh_by`]).
pub const MAX_WEIGHT: u64 = 1_000_000;

impl Inner {
    /// This replica's weight on `resource`, 1 to [`MAX_WEIGHT`].
    pub(crate) fn weight(&self, resource: &str) -> u64 {
        let f = self
            .weigher
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        f.map_or(1, |f| f(resource)).clamp(1, MAX_WEIGHT)
    }
}

/// Bounds on per-resource maps: past this, idle entries are dropped.
const MAP_BOUND: usize = 4096;

impl RedisLimiter {
    /// Connects to Redis and starts the background tasks. Redis being down
    /// at start is not an error: the limiter starts degraded and keeps
    /// trying, serving as the failure mode says meanwhile.
    ///
    /// # Errors
    /// [`crate::Error::InvalidUrl`], [`crate::Error::Limits`] for invalid
    /// rules, [`crate::Error::InvalidConfig`].
    pub async fn connect(
        cfg: RedisConfig,
        rules: Rules,
        adaptive: AdaptiveConfig,
    ) -> Result<RedisLimiter, crate::Error> {
        rules.validate()?;
        adaptive.validate()?;
        let ms = Duration::from_millis;
        for (key, value, min, max) in [
            ("timeout", cfg.timeout, ms(1), ms(60_000)),
            ("lease_ttl", cfg.lease_ttl, ms(100), ms(86_400_000)),
            ("block_ttl", cfg.block_ttl, ms(1), ms(60_000)),
            ("heartbeat", cfg.heartbeat, ms(10), ms(3_600_000)),
        ] {
            if value < min || value > max {
                return Err(crate::Error::InvalidConfig {
                    key,
                    reason: format!("must be between {min:?} and {max:?}, not {value:?}"),
                });
            }
        }
        let client =
            redis::Client::open(cfg.url.as_str()).map_err(|source| crate::Error::InvalidUrl {
                url: cfg.url.clone(),
                source,
            })?;
        let conn = Conn::new(client, cfg.timeout);
        conn.start().await;
        let keys = Keys::new(&cfg.prefix);
        let header = Arc::new(Header {
            keys: keys.clone(),
            recovery_interval_us: u64::try_from(adaptive.recovery_interval.as_micros())
                .unwrap_or(u64::MAX)
                .max(1),
            recovery_factor: adaptive.recovery_factor,
            lease_ttl_ms: u64::try_from(cfg.lease_ttl.as_millis()).unwrap_or(u64::MAX),
            replica: cfg.replica_id.clone(),
            margin_us: u64::try_from(adaptive.jitter_margin.as_micros()).unwrap_or(u64::MAX),
        });
        let (tx, batcher) = crate::lane::start(&conn, None, &header, &cfg);
        let local = Limiter::builder()
            .rules(share(&rules, 1))
            .adaptive(adaptive)
            .build()?;
        local.spawn_maintenance(Duration::from_secs(1));
        let inner = Arc::new(Inner {
            cfg,
            keys,
            rules,
            adaptive,
            conn,
            ops: tx,
            header,
            specs: Mutex::new(HashMap::new()),
            overrides: Mutex::new(HashMap::new()),
            deny: Mutex::new(HashMap::new()),
            strikes: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
            interest: Mutex::new(HashMap::new()),
            blocks: Blocks::default(),
            held: Mutex::new(HashMap::new()),
            local,
            replicas: AtomicU64::new(1),
            listeners: Mutex::new(Vec::new()),
            update_listeners: Mutex::new(Vec::new()),
            notice_listeners: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(vec![batcher]),
            dropped_ops: AtomicU64::new(0),
            weigher: std::sync::RwLock::new(None),
            margins_widened: AtomicBool::new(false),
        });
        // After each reconnection, before decisions go to Redis again.
        inner
            .conn
            .on_return(crate::handback::hook(Arc::downgrade(&inner)));
        let (subscribed, on_bus) = oneshot::channel();
        let mut tasks = vec![
            crate::bus::spawn(Arc::downgrade(&inner), subscribed),
            crate::fallback::spawn_heartbeat(Arc::downgrade(&inner)).await,
            spawn_renewal(Arc::downgrade(&inner)),
        ];
        // Only leased mode leases blocks: in exact mode the sweeper would
        // wake its thread every `block_ttl / 2` (20 times a second by
        // default) to find none.
        if inner.cfg.mode == Mode::Leased {
            tasks.push(crate::leased::spawn_sweeper(Arc::downgrade(&inner)));
        }
        lock(&inner.tasks).extend(tasks);
        // Release notices and capacity updates sent from now on reach this
        // replica (when Redis is there; it never waits past the timeout).
        if !inner.conn.is_degraded() {
            let _ = tokio::time::timeout(inner.cfg.timeout * 4, on_bus).await;
        }
        Ok(RedisLimiter { inner })
    }

    /// This replica's id on the bus.
    pub fn replica_id(&self) -> &str {
        &self.inner.cfg.replica_id
    }

    /// The configuration in force.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.cfg
    }

    /// True while Redis cannot be reached (decisions follow the failure
    /// mode).
    pub fn is_degraded(&self) -> bool {
        self.inner.conn.is_degraded()
    }

    /// Calls `f(degraded)` each time Redis goes away or comes back.
    pub fn on_degraded(&self, f: impl Fn(bool) + Send + Sync + 'static) {
        self.inner.conn.on_change(Arc::new(f));
    }

    /// Replicas seen within the last three heartbeats (at least 1): the
    /// fail-open share of each replica is 1/this.
    pub fn replicas(&self) -> u64 {
        self.inner.replicas.load(Ordering::Relaxed).max(1)
    }

    /// The resources this replica used recently, by name.
    pub fn resources(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.inner.specs).keys().cloned().collect();
        names.sort();
        names
    }

    /// The rules resources are limited by.
    pub fn rules(&self) -> &Rules {
        &self.inner.rules
    }

    /// Calls `f` on every capacity change this replica learns of: its own
    /// reductions and those announced by others on the capacity bus.
    pub fn on_change(&self, f: impl Fn(&CapacityChange) + Send + Sync + 'static) {
        lock(&self.inner.listeners).push(Arc::new(f));
    }

    /// Calls `f` on every capacity update received from another replica
    /// (the monitoring callback of the bus).
    pub fn on_update(&self, f: impl Fn(&CapacityUpdate) + Send + Sync + 'static) {
        lock(&self.inner.update_listeners).push(Arc::new(f));
    }

    /// Weighs this replica's share of a resource it contends for with
    /// other replicas: `f(resource)` is, say, the summed weights of the
    /// tenants it has waiting for it (0 counts as 1; at most
    /// [`MAX_WEIGHT`]). Without one, every replica weighs 1. Replicas
    /// contending for a token bucket or GCRA get its refill in proportion
    /// to their weights (their fair queues then share it between their own
    /// tenants), instead of whichever asks first taking it; a share nobody
    /// uses goes to whoever asks. `f` runs on each decision this replica
    /// sends to Redis (not per queued request), so it should be cheap.
    pub fn weigh_by(&self, f: impl Fn(&str) -> u64 + Send + Sync + 'static) {
        *self
            .inner
            .weigher
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(f));
    }

    /// Closes the limiter: later calls fail with [`Error::Closed`] and the
    /// background tasks stop.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.conn.closed.store(true, Ordering::SeqCst);
        for q in lock(&self.inner.queues).values() {
            q.notify.notify_waiters();
        }
        for t in lock(&self.inner.tasks).drain(..) {
            t.abort();
        }
        self.inner.local.close();
    }
}
