//! [`RedisLimiter`]: limits shared by every replica through Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sluice_limit::{
    AdaptiveConfig, Algorithm, Capacity, CapacityChange, ChangeReason, Error, Limit, Limiter,
    Policy, Rules, headers::RateLimitHeaders,
};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::batch::{self, Header, Kind, Op, Part, Reply, Spec};
use crate::bus::CapacityUpdate;
use crate::config::{Failure, Keys, Mode, RedisConfig};
use crate::conn::{Conn, Unavailable};
use crate::grant::{Held, RedisGrant};
use crate::leased::Blocks;

type ChangeListener = Arc<dyn Fn(&CapacityChange) + Send + Sync>;
type UpdateListener = Arc<dyn Fn(&CapacityUpdate) + Send + Sync>;

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
    ops: mpsc::Sender<Op>,
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
    seq: AtomicU64,
    closed: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Operations dropped because the queue to Redis was full.
    pub(crate) dropped_ops: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.conn.closed.store(true, Ordering::SeqCst);
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

/// A replica's FIFO line for one resource: the head sleeps until the wait
/// Redis reported, or until a release notice wakes it; the others wait
/// their turn behind it, so nobody polls Redis.
#[derive(Debug, Default)]
pub(crate) struct Waitq {
    waiting: AtomicUsize,
    turn: tokio::sync::Mutex<()>,
    pub(crate) notify: Notify,
}

/// Why one attempt did not grant.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Not now: `wait` is exact when `known`, an upper bound otherwise.
    Wait {
        resource: String,
        wait: Duration,
        known: bool,
    },
    /// Never, or not at all (unknown resource, closed).
    Fatal(Error),
    /// Redis is away.
    Down,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The longest wait reported: a year.
const MAX_WAIT_US: u64 = 365 * 24 * 3600 * 1_000_000;

/// How long a waiter trusts a refusal whose end is not known (an in-flight
/// slot comes back when another replica releases it, not at a time) before
/// asking Redis again. The release notice normally wakes it at once, but
/// Redis pub/sub delivers at most once: a notice lost to a reconnect, or
/// published before this replica's subscription was up, must not hold a
/// waiter until the holder's lease expires.
const UNKNOWN_RECHECK: Duration = Duration::from_millis(250);

/// Bounds on per-resource maps: past this, idle entries are dropped.
const MAP_BOUND: usize = 4096;

/// The most limits set at run time: they cannot be evicted (they are
/// configuration), so past this [`RedisLimiter::set_limit`] refuses.
pub const MAX_SET_LIMITS: usize = 65_536;

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
        });
        let (tx, rx) = mpsc::channel(65_536);
        let batcher = tokio::spawn(batch::run(
            rx,
            conn.clone(),
            header,
            cfg.max_batch,
            cfg.max_in_flight_calls,
        ));
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
            seq: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(vec![batcher]),
            dropped_ops: AtomicU64::new(0),
        });
        let (subscribed, on_bus) = oneshot::channel();
        let tasks = vec![
            crate::bus::spawn(Arc::downgrade(&inner), subscribed),
            crate::fallback::spawn_heartbeat(Arc::downgrade(&inner)).await,
            spawn_renewal(Arc::downgrade(&inner)),
            crate::leased::spawn_sweeper(Arc::downgrade(&inner)),
        ];
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

    /// Limits `resource` by `limit` from now on, ahead of the rules (as
    /// [`Limiter::set_limit`] does in-process): for resources configured
    /// at run time, such as a job queue's rate. Every replica that shares
    /// the resource must set the same limit; the state in Redis is kept
    /// and read under the new limit. The local share (used while Redis is
    /// away) gets its 1/N of it.
    ///
    /// # Errors
    /// An invalid `limit` (as [`Limit::validate`]), [`Error::Closed`],
    /// [`Error::RateLimited`] on `resource` when [`MAX_SET_LIMITS`] other
    /// resources are already set (remove some).
    pub fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        limit.validate()?;
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        {
            let mut overrides = lock(&inner.overrides);
            if overrides.len() >= MAX_SET_LIMITS && !overrides.contains_key(resource) {
                return Err(Error::RateLimited {
                    resource: resource.to_owned(),
                    retry_after: None,
                });
            }
            overrides.insert(resource.to_owned(), limit);
        }
        lock(&inner.specs).insert(
            resource.to_owned(),
            Arc::new(Spec {
                name: resource.to_owned(),
                limit,
            }),
        );
        // The local share follows, for when Redis goes away.
        let _ = inner
            .local
            .set_limit(resource, share_limit(limit, self.replicas()));
        // Whatever this replica believed (refusals, a leased block) was
        // under the old limit.
        inner.forget(resource);
        Ok(())
    }

    /// Drops a limit set by [`RedisLimiter::set_limit`]: `resource` goes
    /// back to the rules. Grants and waiters already under way keep the
    /// limit they started with. Returns whether one was set.
    pub fn remove(&self, resource: &str) -> bool {
        let inner = &self.inner;
        let removed = lock(&inner.overrides).remove(resource).is_some();
        if removed {
            lock(&inner.specs).remove(resource);
            inner.local.remove(resource);
            inner.forget(resource);
        }
        removed
    }

    /// Whether `resource` has a limit: set by [`RedisLimiter::set_limit`]
    /// or matched by a rule.
    pub fn contains(&self, resource: &str) -> bool {
        lock(&self.inner.overrides).contains_key(resource)
            || self.inner.rules.resolve(resource).is_some()
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

    /// Takes `cost` from `resource` now, or says how long to wait.
    ///
    /// # Errors
    /// As [`RedisLimiter::try_acquire_many`].
    pub async fn try_acquire(&self, resource: &str, cost: u64) -> Result<RedisGrant, Error> {
        self.try_acquire_many(&[(resource, cost)]).await
    }

    /// Takes from several resources at once, all or nothing, without
    /// waiting.
    ///
    /// # Errors
    /// [`Error::RateLimited`] with the wait (none for in-flight limits);
    /// [`Error::InsufficientCapacity`]; [`Error::UnknownResource`];
    /// [`Error::Closed`]. While Redis is away: the local share's answers
    /// (fail open) or [`Error::RateLimited`] (fail closed).
    pub async fn try_acquire_many(&self, needs: &[(&str, u64)]) -> Result<RedisGrant, Error> {
        let specs = self.inner.needs(needs)?;
        match self.inner.attempt(&specs).await {
            Ok(g) => Ok(g),
            Err(Refusal::Down) => self.inner.fallback(needs, None).await,
            Err(r) => Err(r.into_error()),
        }
    }

    /// Waits until `cost` can be taken from `resource` (FIFO per replica),
    /// or until `deadline`.
    ///
    /// # Errors
    /// As [`RedisLimiter::acquire_many`].
    pub async fn acquire(
        &self,
        resource: &str,
        cost: u64,
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        self.acquire_many(&[(resource, cost)], deadline).await
    }

    /// Waits until every `(resource, cost)` can be taken at once, in FIFO
    /// order among this replica's waiters on the first resource, or until
    /// `deadline`. A wait known to end past the deadline fails at once.
    ///
    /// # Errors
    /// [`Error::DeadlinePassed`] with the wait it would have needed;
    /// [`Error::InsufficientCapacity`]; [`Error::UnknownResource`];
    /// [`Error::Closed`]; fail closed while Redis is away:
    /// [`Error::RateLimited`].
    pub async fn acquire_many(
        &self,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        let inner = &self.inner;
        let specs = inner.needs(needs)?;
        let Some(first) = specs.first() else {
            return Err(Error::UnknownResource(String::new()));
        };
        let q = inner.waitq(&first.0.name);
        if q.waiting.load(Ordering::SeqCst) == 0 {
            match inner.attempt(&specs).await {
                Ok(g) => return Ok(g),
                Err(Refusal::Down) => return inner.fallback(needs, deadline).await,
                Err(Refusal::Fatal(e)) => return Err(e),
                Err(Refusal::Wait { .. }) => {}
            }
        }
        q.waiting.fetch_add(1, Ordering::SeqCst);
        let _line = Leave(&q);
        let _turn = match deadline {
            Some(d) => tokio::time::timeout_at(d, q.turn.lock())
                .await
                .map_err(|_| Error::DeadlinePassed {
                    resource: first.0.name.clone(),
                    wait: None,
                })?,
            None => q.turn.lock().await,
        };
        loop {
            let notified = q.notify.notified();
            let (resource, wait, known) = match inner.attempt(&specs).await {
                Ok(g) => return Ok(g),
                Err(Refusal::Down) => return inner.fallback(needs, deadline).await,
                Err(Refusal::Fatal(e)) => return Err(e),
                Err(Refusal::Wait {
                    resource,
                    wait,
                    known,
                }) => (resource, wait, known),
            };
            if inner.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if resource != first.0.name {
                inner.watch(&resource, &q);
            }
            let now = Instant::now();
            let mut until = now + wait;
            if let Some(d) = deadline {
                if known && until > d {
                    return Err(Error::DeadlinePassed {
                        resource,
                        wait: Some(wait),
                    });
                }
                if now >= d {
                    return Err(Error::DeadlinePassed {
                        resource,
                        wait: None,
                    });
                }
                until = until.min(d);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = notified => {}
            }
        }
    }

    /// The shared state of `resource` (the local share's while Redis is
    /// away).
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub async fn get_capacity(&self, resource: &str) -> Result<Capacity, Error> {
        let inner = &self.inner;
        let spec = inner.spec(resource)?;
        let r = inner
            .request(Kind::Info { spec: spec.clone() })
            .await
            .map_err(|_| ());
        let Ok(r) = r else {
            return inner.local.get_capacity(resource);
        };
        let waiting = lock(&inner.queues)
            .get(resource)
            .map_or(0, |q| q.waiting.load(Ordering::Relaxed));
        let l = spec.limit;
        let total = u64::try_from(r[2]).unwrap_or(0);
        Ok(Capacity {
            resource: resource.to_owned(),
            algorithm: l.kind(),
            available: r[0] as f64,
            total,
            burst: u64::try_from(r[3]).unwrap_or(0),
            window: l.window(),
            in_flight: if l.kind() == Algorithm::InFlight {
                total.saturating_sub(u64::try_from(r[0]).unwrap_or(0))
            } else {
                0
            },
            waiting,
            configured: l.capacity(),
            paused_for: (r[1] > 0).then(|| Duration::from_micros(r[1] as u64)),
            configured_window: l.window(),
            // The shared scripts hold back no margin: the local share
            // does, for when Redis goes away. An announced rate is read
            // by this replica's own limiter and cuts the shared capacity
            // on the next 429.
            jitter_margin: Duration::ZERO,
            reason: (r[1] > 0).then(|| "paused for the upstream's Retry-After".to_owned()),
            announced_per_second: inner
                .local
                .get_capacity(resource)
                .ok()
                .and_then(|c| c.announced_per_second),
        })
    }

    /// An upstream answered 429 for `resource`: the shared capacity is cut
    /// by the reduce factor (at most once per cooldown, for every replica
    /// at once), the resource pauses for `retry_after` (capped), and the
    /// reduction is announced on the capacity bus.
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub async fn report_throttled(
        &self,
        resource: &str,
        retry_after: Option<Duration>,
    ) -> Result<Option<CapacityChange>, Error> {
        // The local share learns of it too, for when Redis goes away.
        let _ = self.inner.local.report_throttled(resource, retry_after);
        let a = &self.inner.adaptive;
        let cut = Cut::Factor(a.reduce_factor, a.recovery_interval, a.recovery_factor);
        self.throttle(resource, retry_after, cut).await
    }

    /// An upstream's answer to a call on `requests` (and `tokens`), under
    /// the limiter's [`Policy`]. Under the evidence policy (the default) a
    /// 429 pauses the shared resource for its Retry-After, for every
    /// replica, and only 429s that keep coming (the configured number in
    /// a row, each at least a tenth of the collision wait after the last)
    /// cut the shared capacity, once per cooldown for all replicas; any
    /// success clears the count. Under the seed policy every 429 cuts.
    /// The local share hears every answer, for when Redis goes away.
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub async fn observe(
        &self,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
    ) -> Result<Option<CapacityChange>, Error> {
        let inner = &self.inner;
        let _ = inner.local.observe(requests, tokens, status, headers);
        let Some(resource) = requests.or(tokens.filter(|_| status == 429)) else {
            return Ok(None);
        };
        let cfg = inner.adaptive;
        if status != 429 {
            if status < 400 {
                lock(&inner.strikes).remove(resource);
            }
            return Ok(None);
        }
        let wait = headers.throttle_wait();
        let seed = Cut::Factor(
            cfg.reduce_factor,
            cfg.recovery_interval,
            cfg.recovery_factor,
        );
        if cfg.policy == Policy::Seed {
            return self.throttle(resource, wait, seed).await;
        }
        // Headers that announce a lower rate are evidence enough: cut to
        // it (as this replica's own limiter reads them), recovering at the
        // seed's pace; a 429 beyond it cuts to it again, never below.
        let spec = inner.spec(resource)?;
        if let Some(target) = inner
            .local
            .get_capacity(resource)
            .ok()
            .and_then(|c| c.announced_per_second)
            .map(|rate| (rate * spec.limit.window().as_secs_f64()).floor() as u64)
            .filter(|&t| t >= 1 && t < spec.limit.capacity())
        {
            lock(&inner.strikes).remove(resource);
            return self.throttle(resource, wait, Cut::To(target)).await;
        }
        let proven = {
            let mut strikes = lock(&inner.strikes);
            let now = Instant::now();
            let (n, last) = strikes.entry(resource.to_owned()).or_insert((0, now));
            if *n == 0 || now.duration_since(*last) >= cfg.strike_spacing() {
                *n += 1;
            }
            *last = now;
            let proven = *n >= cfg.strikes;
            if proven {
                *n = 0;
            }
            proven
        };
        // A collision pauses without cutting; 429s that kept coming cut,
        // and capacity comes back fast on clean answers.
        let cut = if proven {
            Cut::Factor(
                cfg.reduce_factor,
                cfg.fast_recovery_interval,
                cfg.fast_recovery_factor,
            )
        } else {
            Cut::Pause
        };
        self.throttle(resource, wait, cut).await
    }

    /// Pauses `resource` for `retry_after` (capped) and cuts its shared
    /// capacity as `cut` says (a factor at most once per cooldown, or down
    /// to a target), through the throttle script; a cut is announced on
    /// the capacity bus.
    async fn throttle(
        &self,
        resource: &str,
        retry_after: Option<Duration>,
        cut: Cut,
    ) -> Result<Option<CapacityChange>, Error> {
        let inner = &self.inner;
        let spec = inner.spec(resource)?;
        let pause = retry_after
            .unwrap_or_default()
            .min(inner.adaptive.max_pause);
        let cooldown = inner.adaptive.cooldown.unwrap_or(spec.limit.window());
        let (factor, interval, recovery, target) = match cut {
            Cut::Pause => (
                1.0,
                inner.adaptive.recovery_interval,
                inner.adaptive.recovery_factor,
                0,
            ),
            Cut::Factor(f, interval, recovery) => (f, interval, recovery, 0),
            Cut::To(target) => (
                1.0,
                inner.adaptive.recovery_interval,
                inner.adaptive.recovery_factor,
                target,
            ),
        };
        let script = redis::Script::new(include_str!("../lua/throttle.lua"));
        let mut inv = script.prepare_invoke();
        inv.key(inner.keys.adaptive(resource))
            .arg(spec.limit.capacity())
            .arg(factor)
            .arg(micros(cooldown))
            .arg(micros(pause))
            .arg(micros(interval).max(1))
            .arg(recovery)
            .arg(target);
        let out: Result<Vec<i64>, Unavailable> = inner
            .conn
            .call(|mut c| async move { inv.invoke_async(&mut c).await })
            .await;
        let Ok(out) = out else {
            return Ok(None);
        };
        inner.forget(resource);
        if out.first() != Some(&1) || out.len() < 5 {
            return Ok(None);
        }
        let (previous, capacity) = (out[1].max(0) as u64, out[2].max(0) as u64);
        let update = CapacityUpdate {
            resource: resource.to_owned(),
            agent_id: inner.cfg.replica_id.clone(),
            new_capacity: capacity,
            reason: "upstream answered 429".into(),
            timestamp: sluice_limit::headers::format_rfc3339(
                out[3],
                u32::try_from(out[4].clamp(0, 999_999)).unwrap_or(0),
            ),
        };
        if let Ok(json) = serde_json::to_string(&update) {
            let channel = inner.keys.capacity_channel.clone();
            let _ = inner
                .conn
                .call(|mut c| async move {
                    redis::cmd("PUBLISH")
                        .arg(channel)
                        .arg(json)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await;
        }
        let change = CapacityChange {
            resource: resource.to_owned(),
            previous,
            capacity,
            configured: spec.limit.capacity(),
            window: spec.limit.window(),
            reason: ChangeReason::Throttled,
            at: std::time::Instant::now(),
        };
        inner.changed(&change);
        Ok(Some(change))
    }
}

/// What a 429 does to a resource's shared capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    /// Nothing: a pause for the Retry-After only (a timing collision).
    Pause,
    /// Multiply by the factor (at most once per cooldown), then recover by
    /// the factor every interval.
    Factor(f64, Duration, f64),
    /// Down to this capacity per window: what the upstream announces.
    To(u64),
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Each replica's share of every limit: 1/`n`, at least 1.
pub(crate) fn share(rules: &Rules, n: u64) -> Rules {
    rules.map(|l| share_limit(l, n))
}

/// One replica's share of `l`: 1/`n`, at least 1.
pub(crate) fn share_limit(l: Limit, n: u64) -> Limit {
    let n = n.max(1);
    let burst = (l.effective_burst() / n).max(1);
    let l2 = Limit::new((l.capacity() / n).max(1), l.window()).algorithm(l.kind());
    if matches!(l.kind(), Algorithm::TokenBucket | Algorithm::Gcra) {
        l2.burst(burst)
    } else {
        l2
    }
}

struct Leave<'a>(&'a Waitq);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        // Whoever is next may go now rather than at its old wake-up.
        self.0.notify.notify_one();
    }
}

impl Refusal {
    fn into_error(self) -> Error {
        match self {
            Refusal::Wait {
                resource,
                wait,
                known,
            } => Error::RateLimited {
                resource,
                retry_after: known.then_some(wait),
            },
            Refusal::Fatal(e) => e,
            Refusal::Down => Error::Closed,
        }
    }
}

impl Inner {
    pub(crate) fn held_leases(&self) -> MutexGuard<'_, HashMap<String, Arc<Spec>>> {
        lock(&self.held)
    }

    /// Queues an operation that needs no answer. A full queue drops it:
    /// settles are then lost and releases wait for the lease to expire.
    pub(crate) fn send(&self, op: Op) {
        if self.ops.try_send(op).is_err() {
            self.dropped_ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs one operation in the next batch.
    pub(crate) async fn request(&self, kind: Kind) -> Result<Reply, Unavailable> {
        if self.conn.is_degraded() {
            return Err(Unavailable);
        }
        let (tx, rx) = oneshot::channel();
        self.ops
            .send(Op {
                kind,
                reply: Some(tx),
            })
            .await
            .map_err(|_| Unavailable)?;
        rx.await.unwrap_or(Err(Unavailable))
    }

    pub(crate) fn spec(&self, resource: &str) -> Result<Arc<Spec>, Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mut specs = lock(&self.specs);
        if let Some(s) = specs.get(resource) {
            return Ok(s.clone());
        }
        let set = lock(&self.overrides).get(resource).copied();
        let limit = set
            .or_else(|| self.rules.resolve(resource))
            .ok_or_else(|| Error::UnknownResource(resource.to_owned()))?;
        if specs.len() >= MAP_BOUND {
            specs.clear();
        }
        let s = Arc::new(Spec {
            name: resource.to_owned(),
            limit,
        });
        specs.insert(resource.to_owned(), s.clone());
        Ok(s)
    }

    /// The specs of `needs`, a resource named twice taken once at the sum
    /// of its costs.
    fn needs(&self, needs: &[(&str, u64)]) -> Result<Vec<(Arc<Spec>, u64)>, Error> {
        let mut out: Vec<(Arc<Spec>, u64)> = Vec::with_capacity(needs.len());
        for (r, cost) in needs {
            match out.iter_mut().find(|(s, _)| s.name == *r) {
                Some((_, c)) => *c = c.saturating_add(*cost),
                None => out.push((self.spec(r)?, *cost)),
            }
        }
        for (spec, cost) in &out {
            if *cost > spec.limit.max_cost() {
                return Err(Error::InsufficientCapacity {
                    resource: spec.name.clone(),
                    cost: *cost,
                    capacity: spec.limit.max_cost(),
                });
            }
        }
        Ok(out)
    }

    fn waitq(&self, resource: &str) -> Arc<Waitq> {
        let mut qs = lock(&self.queues);
        if qs.len() >= MAP_BOUND {
            qs.retain(|_, q| Arc::strong_count(q) > 1);
        }
        qs.entry(resource.to_owned()).or_default().clone()
    }

    /// Wakes this replica's head waiter on `resource`: something came back.
    pub(crate) fn wake(&self, resource: &str) {
        lock(&self.deny).remove(resource);
        if let Some(q) = lock(&self.queues).get(resource) {
            q.notify.notify_one();
        }
        if let Some(qs) = lock(&self.interest).remove(resource) {
            for q in qs {
                q.notify.notify_one();
            }
        }
    }

    /// Wakes `q`'s head at `resource`'s next release notice as well.
    fn watch(&self, resource: &str, q: &Arc<Waitq>) {
        let mut m = lock(&self.interest);
        if m.len() >= MAP_BOUND {
            // Stale entries only cost a spurious wake-up; drop them all.
            m.clear();
        }
        let qs = m.entry(resource.to_owned()).or_default();
        if !qs.iter().any(|x| Arc::ptr_eq(x, q)) {
            qs.push(q.clone());
        }
    }

    /// Forgets what this replica believed about `resource` (deny cache,
    /// leased block) after its capacity changed.
    pub(crate) fn forget(self: &Arc<Self>, resource: &str) {
        self.blocks.drop_block(self, resource);
        self.wake(resource);
    }

    pub(crate) fn changed(&self, change: &CapacityChange) {
        let ls = lock(&self.listeners).clone();
        for l in ls {
            l(change);
        }
    }

    pub(crate) fn updated(&self, update: &CapacityUpdate) {
        let ls = lock(&self.update_listeners).clone();
        for l in ls {
            l(update);
        }
    }

    pub(crate) fn member(&self, spec: &Spec, cost: u64) -> String {
        if spec.algo() <= 2 {
            return String::new();
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{n}:{cost}", self.cfg.replica_id)
    }

    /// One try: the deny cache, then a leased block or Redis.
    pub(crate) async fn attempt(
        self: &Arc<Self>,
        needs: &[(Arc<Spec>, u64)],
    ) -> Result<RedisGrant, Refusal> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refusal::Fatal(Error::Closed));
        }
        if self.conn.is_degraded() {
            return Err(Refusal::Down);
        }
        {
            let now = Instant::now();
            let deny = lock(&self.deny);
            for (spec, cost) in needs {
                if let Some((until, denied)) = deny.get(&spec.name)
                    && *until > now
                    && cost >= denied
                {
                    return Err(Refusal::Wait {
                        resource: spec.name.clone(),
                        wait: *until - now,
                        known: spec.algo() != 4,
                    });
                }
            }
        }
        if self.cfg.mode == Mode::Leased && needs.iter().all(|(s, _)| s.leasable()) {
            return crate::leased::attempt(self, needs).await;
        }
        let parts: Vec<Part> = needs
            .iter()
            .map(|(spec, cost)| Part {
                spec: spec.clone(),
                cost: *cost,
                member: self.member(spec, *cost),
            })
            .collect();
        let r = self
            .request(Kind::Acquire(parts.clone()))
            .await
            .map_err(|_| Refusal::Down)?;
        if r[0] == 1 {
            let held: Vec<Held> = parts
                .into_iter()
                .map(|p| Held {
                    spec: p.spec,
                    reserved: p.cost,
                    member: p.member,
                })
                .collect();
            {
                let mut leases = self.held_leases();
                for h in &held {
                    if h.spec.algo() == 4 {
                        leases.insert(h.member.clone(), h.spec.clone());
                    }
                }
            }
            return Ok(RedisGrant {
                inner: self.clone(),
                parts: held,
                local: None,
            });
        }
        Err(self.refused(needs, r))
    }

    /// A refusal from a reply `[0, wait_us, idx, kind]`, remembered in the
    /// deny cache until the wait has passed.
    pub(crate) fn refused(&self, needs: &[(Arc<Spec>, u64)], r: Reply) -> Refusal {
        // The batcher turned the script's resource number into the part's.
        let i = usize::try_from(r[2]).unwrap_or(1).saturating_sub(1);
        let Some((spec, cost)) = needs.get(i).or(needs.first()).cloned() else {
            return Refusal::Fatal(Error::UnknownResource(String::new()));
        };
        if r[3] == 1 {
            return Refusal::Fatal(Error::InsufficientCapacity {
                resource: spec.name.clone(),
                cost,
                capacity: spec.limit.max_cost(),
            });
        }
        // Capped, so that no instant arithmetic can overflow on a limit of
        // one per century.
        let wait = Duration::from_micros(u64::try_from(r[1]).unwrap_or(0).clamp(1, MAX_WAIT_US));
        let known = r[3] == 0;
        let wait = if known {
            wait
        } else {
            wait.min(UNKNOWN_RECHECK)
        };
        let mut deny = lock(&self.deny);
        if deny.len() >= MAP_BOUND {
            let now = Instant::now();
            deny.retain(|_, (until, _)| *until > now);
        }
        deny.insert(spec.name.clone(), (Instant::now() + wait, cost));
        Refusal::Wait {
            resource: spec.name.clone(),
            wait,
            known,
        }
    }

    /// Redis is away: the local share (fail open) or a refusal (fail
    /// closed).
    async fn fallback(
        self: &Arc<Self>,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        match self.cfg.failure {
            Failure::FailClosed => Err(Error::RateLimited {
                resource: needs.first().map(|n| n.0.to_owned()).unwrap_or_default(),
                retry_after: Some(Duration::from_secs(1)),
            }),
            Failure::FailOpen => {
                let g = match deadline {
                    Some(_) => self.local.acquire_many(needs, deadline).await?,
                    None => self.local.try_acquire_many(needs)?,
                };
                Ok(RedisGrant {
                    inner: self.clone(),
                    parts: Vec::new(),
                    local: Some(g),
                })
            }
        }
    }
}

/// Renews this replica's in-flight leases every third of their TTL, so a
/// live grant never loses its slot and a dead replica's slots expire.
fn spawn_renewal(weak: std::sync::Weak<Inner>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let every = match weak.upgrade() {
            Some(i) => i.cfg.lease_ttl / 3,
            None => return,
        };
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let held: Vec<(String, Arc<Spec>)> = inner
                .held_leases()
                .iter()
                .map(|(m, s)| (m.clone(), s.clone()))
                .collect();
            for (member, spec) in held {
                inner.send(Op {
                    kind: Kind::Renew { spec, member },
                    reply: None,
                });
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_replica_gets_its_share_never_zero() {
        let rules = Rules::new()
            .exact("m", Limit::per_second(10).burst(10))
            .prefix("s:", Limit::sliding_window(10, Duration::from_secs(60)))
            .fallback(Limit::in_flight(2));
        let third = share(&rules, 3);
        assert_eq!(third.resolve("m"), Some(Limit::per_second(3).burst(3)));
        assert_eq!(
            third.resolve("s:x"),
            Some(Limit::sliding_window(3, Duration::from_secs(60)))
        );
        // 2 slots over 3 replicas: 1 each, not 0 (a share of nothing
        // would refuse everything while Redis is away).
        assert_eq!(third.resolve("other"), Some(Limit::in_flight(1)));
        assert_eq!(share(&rules, 0).resolve("m"), rules.resolve("m"));
    }
}
