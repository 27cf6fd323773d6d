//! [`RedisLimiter`] as a [`RateLimiter`], and [`RedisGrant`] as the
//! [`HeldGrant`] of a [`Permit`], so that callers hold one
//! [`SharedLimiter`](sluice_limit::SharedLimiter) whether limits live in
//! this process or in Redis.

use std::time::Duration;

use futures_util::StreamExt;
use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Capacity, Error, HeldGrant, Limit, LimitFuture, Permit, RateLimiter};
use tokio::time::Instant;

use crate::{RedisGrant, RedisLimiter};

impl HeldGrant for RedisGrant {
    fn settle(&mut self, actual: u64) {
        RedisGrant::settle(self, actual);
    }

    fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        RedisGrant::settle_part(self, resource, actual)
    }
}

impl RateLimiter for RedisLimiter {
    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        LimitFuture::boxed(async move {
            RedisLimiter::acquire_many(self, needs, deadline)
                .await
                .map(Permit::new)
        })
    }

    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        LimitFuture::boxed(async move {
            RedisLimiter::try_acquire_many(self, needs)
                .await
                .map(Permit::new)
        })
    }

    fn get_capacity<'a>(&'a self, resource: &'a str) -> LimitFuture<'a, Result<Capacity, Error>> {
        LimitFuture::boxed(RedisLimiter::get_capacity(self, resource))
    }

    /// Only the resources this replica used recently are read from Redis,
    /// all at once, so the batcher puts up to `max_batch` of them in one
    /// script call (a few calls for the thousands of resources a replica
    /// may know, not one round trip each).
    fn capacities<'a>(
        &'a self,
        wanted: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> LimitFuture<'a, Vec<Capacity>> {
        let mut names = self.resources();
        names.retain(|n| wanted(n));
        LimitFuture::boxed(async move {
            futures_util::stream::iter(names)
                .map(|name| async move { RedisLimiter::get_capacity(self, &name).await })
                .buffered(self.config().max_batch.max(1))
                .filter_map(|c| std::future::ready(c.ok()))
                .collect()
                .await
        })
    }

    /// As [`RedisLimiter::observe`], grant or not: a 429 pauses the shared
    /// resource for the Retry-After and 429s that keep coming cut its
    /// shared capacity; the remaining counts of rate-limit headers are not
    /// synced into Redis (the local share hears them).
    fn observe<'a>(
        &'a self,
        _grant: Option<&'a Permit>,
        requests: Option<&'a str>,
        tokens: Option<&'a str>,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> LimitFuture<'a, Result<(), Error>> {
        LimitFuture::boxed(async move {
            RedisLimiter::observe(self, requests, tokens, status, headers)
                .await
                .map(drop)
        })
    }

    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> LimitFuture<'a, Result<(), Error>> {
        LimitFuture::boxed(async move {
            RedisLimiter::report_throttled(self, resource, retry_after)
                .await
                .map(drop)
        })
    }

    /// Every replica sets the same limits, from the same config; the
    /// state is shared through Redis.
    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        RedisLimiter::set_limit(self, resource, limit)
    }

    fn contains(&self, resource: &str) -> bool {
        RedisLimiter::contains(self, resource)
    }

    fn remove_idle(&self, resource: &str) -> bool {
        // Grants and waiters under way keep the limit they started with,
        // so dropping it is always safe here.
        self.remove(resource);
        true
    }
}
