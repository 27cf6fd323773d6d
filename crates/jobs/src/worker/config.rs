//! How a worker pool runs each queue, and the pool's own timings.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use sluice_limit::Limit;

use crate::retention::Retention;
use crate::worker::backoff::Backoff;
use sluice_store::{Clock, SystemClock};

/// The seed's per-queue concurrency.
pub const DEFAULT_CONCURRENCY: usize = 5;
/// The seed's per-queue rate, jobs per second.
pub const DEFAULT_RATE: u64 = 10;
/// Outcomes that may await their commit without holding a slot, per slot
/// of the queue's concurrency, by default (see
/// [`QueueConfig::awaiting_commit`]). With no-op jobs at concurrency 100,
/// twice the concurrency left a burn-down's one SQLite writer idle while
/// the runs that a commit had just freed went through the pool, and the
/// next claim waited for them: four times kept it busy, about 10 % more
/// jobs a second (docs/jobs.md, "Throughput").
pub const DEFAULT_AWAITING_PER_SLOT: usize = 4;
/// Throttles (429s) in a row a job may take per attempt before one uses
/// up an attempt.
pub const DEFAULT_MAX_THROTTLES: u32 = 5;

/// How one queue is worked.
///
/// ```
/// use sluice_limit::Limit;
/// use sluice_jobs::worker::QueueConfig;
///
/// let q = QueueConfig::new("discord")
///     .concurrency(8)
///     .rate(Limit::sliding_window(20, std::time::Duration::from_secs(1)))
///     .group_rate(Limit::sliding_window(2, std::time::Duration::from_secs(1)));
/// assert_eq!(q.concurrency.get(), 8);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue's name.
    pub name: String,
    /// Jobs run at once (the seed's 5): waiting for their rate or
    /// running their handler. A run frees its slot when its handler
    /// returns, not when its outcome is committed (see
    /// [`awaiting_commit`](Self::awaiting_commit)).
    pub concurrency: NonZeroUsize,
    /// Job starts allowed, as a limit on the limiter resource
    /// `jobs:{queue}` (the seed's 10 in any second, sliding window);
    /// `None` for no rate.
    pub rate: Option<Limit>,
    /// Job starts allowed per group, on `jobs:{queue}:{tenant}:{group}`; none by
    /// default.
    pub group_rate: Option<Limit>,
    /// Jobs claimed ahead of free slots at most (see
    /// [`prefetch`](Self::prefetch)); `None` for as many as
    /// [`concurrency`](Self::concurrency).
    pub prefetch: Option<usize>,
    /// Outcomes handed to the pool's batcher and not yet committed, at
    /// most (see [`awaiting_commit`](Self::awaiting_commit)); `None` for
    /// [`DEFAULT_AWAITING_PER_SLOT`] times [`concurrency`](Self::concurrency).
    pub awaiting_commit: Option<usize>,
}

impl QueueConfig {
    /// `name` with the seed's defaults: 5 at once, 10 starts in any second.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            concurrency: NonZeroUsize::new(DEFAULT_CONCURRENCY).unwrap_or(NonZeroUsize::MIN),
            rate: Some(Limit::sliding_window(DEFAULT_RATE, Duration::from_secs(1))),
            group_rate: None,
            prefetch: None,
            awaiting_commit: None,
        }
    }

    /// Runs up to `n` jobs at once (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        self
    }

    /// Claims up to `n` jobs more than it has free slots, so that a slot
    /// that frees up starts a job at once instead of waiting for a claim,
    /// and one claim serves more jobs. As
    /// many as [`concurrency`](Self::concurrency) by default; 0 claims only
    /// for free slots. A job claimed ahead is leased (and its lease
    /// renewed) from its claim; at shutdown it runs if a slot is free,
    /// else it is given back at once without using an attempt; after a
    /// crash it is rescued as a running job is, which counts an attempt.
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// How many jobs the queue claims ahead of free slots at most.
    pub fn ahead(&self) -> usize {
        self.prefetch.unwrap_or(self.concurrency.get())
    }

    /// Lets up to `n` runs whose handlers have returned wait for their
    /// outcome's commit without holding a slot, so that the next jobs run
    /// while a batch of outcomes is written ([`DEFAULT_AWAITING_PER_SLOT`]
    /// times the [`concurrency`](Self::concurrency) by default). Such a run keeps its
    /// lease, renewed by heartbeat, until its outcome is durable; a crash
    /// before that runs the job again once the lease expires (at least
    /// once), so a crash repeats at most `concurrency + n` runs. Beyond
    /// `n`, a run whose handler returned keeps its slot until a place
    /// frees up. 0 holds every slot until its outcome is committed: a
    /// crash repeats at most `concurrency` runs, and one commit carries at
    /// most that many.
    #[must_use]
    pub fn awaiting_commit(mut self, n: usize) -> Self {
        self.awaiting_commit = Some(n);
        self
    }

    /// How many outcomes may await their commit without holding a slot.
    pub fn uncommitted(&self) -> usize {
        self.awaiting_commit
            .unwrap_or(DEFAULT_AWAITING_PER_SLOT * self.concurrency.get())
    }

    /// Starts jobs at most as `limit` allows.
    #[must_use]
    pub fn rate(mut self, limit: Limit) -> Self {
        self.rate = Some(limit);
        self
    }

    /// Starts jobs as fast as slots free up.
    #[must_use]
    pub fn unlimited(mut self) -> Self {
        self.rate = None;
        self
    }

    /// Starts the jobs of each group at most as `limit` allows.
    #[must_use]
    pub fn group_rate(mut self, limit: Limit) -> Self {
        self.group_rate = Some(limit);
        self
    }

    /// The limiter resource of the queue's rate.
    pub fn rate_resource(&self) -> String {
        format!("jobs:{}", self.name)
    }

    /// The limiter resource of the rate of one of `tenant`'s groups: a
    /// group is its tenant's, so another tenant naming the same group
    /// neither spends nor shares its rate.
    pub fn group_resource(&self, tenant: &str, group: &str) -> String {
        format!("jobs:{}:{tenant}:{group}", self.name)
    }
}

/// Timings of a worker pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// This pool's worker id in leases; `{host}-{pid}-{random}` by default.
    pub worker_id: String,
    /// Where "now" comes from for retry times: the store's clock.
    pub clock: Arc<dyn Clock>,
    /// How long a claim leases a job (30 s); heartbeats renew it.
    pub lease: Duration,
    /// How often a running job's lease is renewed (a third of the lease).
    pub heartbeat: Duration,
    /// How long an idle queue waits before claiming again (50 ms).
    pub poll: Duration,
    /// Retry waits.
    pub backoff: Backoff,
    /// Throttles in a row that a job may take per attempt.
    pub max_throttles: u32,
    /// How often expired leases are rescued (1 s); `None` for never.
    pub rescue_every: Option<Duration>,
    /// How often finished jobs are cleaned up (60 s); `None` for never.
    pub cleanup_every: Option<Duration>,
    /// How long finished jobs are kept (the seed's 1 h completed, 24 h dead).
    pub retention: Retention,
}

impl Default for PoolConfig {
    fn default() -> Self {
        let lease = Duration::from_secs(30);
        Self {
            worker_id: default_worker_id(),
            clock: Arc::new(SystemClock),
            lease,
            heartbeat: lease / 3,
            poll: Duration::from_millis(50),
            backoff: Backoff::default(),
            max_throttles: DEFAULT_MAX_THROTTLES,
            rescue_every: Some(Duration::from_secs(1)),
            cleanup_every: Some(Duration::from_secs(60)),
            retention: Retention::default(),
        }
    }
}

fn default_worker_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".to_owned());
    let host: String = host.chars().take(100).collect();
    format!("{host}-{}-{:08x}", std::process::id(), fastrand::u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_rate_is_its_tenants() {
        let q = QueueConfig::new("q");
        assert_eq!(q.group_resource("acme", "g"), "jobs:q:acme:g");
        assert_ne!(
            q.group_resource("acme", "g"),
            q.group_resource("globex", "g")
        );
    }
}
