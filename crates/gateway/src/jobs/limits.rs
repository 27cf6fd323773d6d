//! The gateway's limits as the workers' [`JobLimits`]: in-process, or
//! through Redis with `[redis]`, so that a job's queue rate, group rate
//! and API bucket are the ones every replica (and its proxied calls)
//! takes from.

use std::time::Duration;

use sluice_jobs::worker::BoxFuture;
use sluice_jobs::{JobLimits, LimitGrant, SharedLimits};
use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Error, Limit};
use sluice_redis::RedisLimiter;
use tokio::time::Instant;

use crate::limits::Limits;

impl Limits {
    /// These limits for the job workers: the same in-process limiter, or
    /// the same Redis-backed limiter the request path uses.
    pub(crate) fn for_jobs(&self) -> SharedLimits {
        match self {
            Limits::Local(l) => l.into(),
            Limits::Shared(r, _) => SharedLimits::new(RedisJobLimits(r.clone())),
        }
    }
}

/// [`RedisLimiter`] as [`JobLimits`]. Limits the workers set at run time
/// (queue and group rates) are set on every replica alike, from the same
/// config, and shared through Redis.
#[derive(Debug, Clone)]
pub(crate) struct RedisJobLimits(pub(crate) RedisLimiter);

impl JobLimits for RedisJobLimits {
    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        self.0.set_limit(resource, limit)
    }

    fn contains(&self, resource: &str) -> bool {
        self.0.contains(resource)
    }

    fn remove_idle(&self, resource: &str) -> bool {
        // Grants and waiters under way keep the limit they started with,
        // so dropping it is always safe here.
        self.0.remove(resource);
        true
    }

    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<LimitGrant, Error>> {
        Box::pin(async move { self.0.try_acquire_many(needs).await.map(LimitGrant::new) })
    }

    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> BoxFuture<'a, Result<LimitGrant, Error>> {
        Box::pin(async move {
            self.0
                .acquire_many(needs, deadline)
                .await
                .map(LimitGrant::new)
        })
    }

    /// As [`Limits::observe`] in distributed mode: a 429 reduces the shared
    /// capacity and pauses it; remaining counts are not synced into Redis.
    fn observe_answer<'a>(
        &'a self,
        _grant: &'a LimitGrant,
        resource: &'a str,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if status == 429 {
                self.0
                    .report_throttled(resource, headers.throttle_wait())
                    .await?;
            }
            Ok(())
        })
    }

    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.0
                .report_throttled(resource, retry_after)
                .await
                .map(drop)
        })
    }
}
