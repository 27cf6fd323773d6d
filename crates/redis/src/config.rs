//! [`RedisConfig`]: where Redis is and how the shared limiter behaves.

use std::time::Duration;

/// How decisions are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every decision is one script call in Redis (concurrent decisions of
    /// a replica share a call): never more than the limit.
    #[default]
    Exact,
    /// A replica leases small blocks of tokens for a short time and spends
    /// them locally; see `docs/distributed.md` for the bound.
    Leased,
}

impl Mode {
    /// The name used in configuration files.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Exact => "exact",
            Mode::Leased => "leased",
        }
    }
}

/// What happens while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Failure {
    /// Each replica limits alone on its share (1/N) of every limit.
    #[default]
    FailOpen,
    /// Every request is refused with a retry-after.
    FailClosed,
}

impl Failure {
    /// The name used in configuration files.
    pub const fn as_str(self) -> &'static str {
        match self {
            Failure::FailOpen => "fail_open",
            Failure::FailClosed => "fail_closed",
        }
    }
}

/// Configuration of a [`RedisLimiter`](crate::RedisLimiter).
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// Put before every key and channel name (default `sluice:`).
    pub prefix: String,
    /// Exact or leased decisions.
    pub mode: Mode,
    /// The longest one Redis call may take before Redis counts as down.
    pub timeout: Duration,
    /// Behaviour while Redis is down.
    pub failure: Failure,
    /// This replica's name on the capacity bus and in the replica count
    /// (default: random).
    pub replica_id: String,
    /// How long an in-flight slot stays held without renewal: a crashed
    /// replica's slots come back after this.
    pub lease_ttl: Duration,
    /// Leased mode: how long a block of tokens may be spent locally before
    /// what is left goes back.
    pub block_ttl: Duration,
    /// The most decisions one script call makes.
    pub max_batch: usize,
    /// Script calls in flight at once on the connection (pipelining).
    /// Fewer calls carry bigger batches: on loopback, CPU-bound, 1 call
    /// decided ~120k/s and 8 calls ~75k/s (`sluice bench redis
    /// --pipeline`); more help when the round trip, not the CPU, is the
    /// limit. Default 2.
    pub max_in_flight_calls: usize,
    /// How often a replica says it is alive; replicas count as present
    /// for three of these.
    pub heartbeat: Duration,
}

impl RedisConfig {
    /// Defaults for `url`: prefix `sluice:`, exact mode, 250 ms timeout,
    /// fail open, 30 s in-flight leases, 100 ms blocks.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "sluice:".into(),
            mode: Mode::Exact,
            timeout: Duration::from_millis(250),
            failure: Failure::FailOpen,
            replica_id: format!("replica-{:016x}", fastrand_u64()),
            lease_ttl: Duration::from_secs(30),
            block_ttl: Duration::from_millis(100),
            max_batch: 256,
            max_in_flight_calls: 2,
            heartbeat: Duration::from_secs(2),
        }
    }
}

/// A random id without another dependency: std's hasher is randomly keyed.
fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Key and channel names. Every key carries the hash tag `{rl}` so that
/// multi-key scripts (one call decides many resources) work on Redis
/// Cluster: all limiter keys live in one slot.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    base: String,
    pub(crate) capacity_channel: String,
    pub(crate) release_channel: String,
    pub(crate) notice_channel: String,
    pub(crate) replicas: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Keys {
            base: format!("{prefix}{{rl}}:"),
            capacity_channel: format!("{prefix}ratelimit.capacity"),
            release_channel: format!("{prefix}ratelimit.release"),
            notice_channel: format!("{prefix}notices"),
            replicas: format!("{prefix}{{rl}}:replicas"),
        }
    }

    /// The meter state of `resource`.
    pub(crate) fn state(&self, resource: &str) -> String {
        format!("{}b:{resource}", self.base)
    }

    /// The replicas' fair shares of `resource` (see `ops.lua`).
    pub(crate) fn fair(&self, resource: &str) -> String {
        format!("{}f:{resource}", self.base)
    }

    /// The adaptive state (reduced capacity, pause) of `resource`.
    pub(crate) fn adaptive(&self, resource: &str) -> String {
        format!("{}a:{resource}", self.base)
    }
}
