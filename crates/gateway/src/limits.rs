//! Where limits live: in this process ([`Limiter`]) or, with `[redis]`
//! configured, shared by every replica through Redis ([`RedisLimiter`]).
//! The smallest surface the gateway needs over both; the in-process arm
//! calls straight through. Grants held for callers of the limiter API are
//! in [`holds`].

pub(crate) mod holds;

use futures_util::StreamExt;
use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Capacity, Error, Grant, Limiter};
use sluice_redis::{RedisGrant, RedisLimiter};
use tokio::time::Instant;

/// The gateway's limits.
#[derive(Debug)]
pub(crate) enum Limits {
    /// One process: the in-process limiter.
    Local(Limiter),
    /// Several replicas: Redis.
    Shared(RedisLimiter),
}

/// A grant from either.
#[derive(Debug)]
pub(crate) enum AnyGrant {
    Local(Grant),
    Shared(RedisGrant),
}

impl AnyGrant {
    /// Settles every part at `actual`.
    pub(crate) fn settle(&mut self, actual: u64) {
        match self {
            AnyGrant::Local(g) => g.settle(actual),
            AnyGrant::Shared(g) => g.settle(actual),
        }
    }

    /// Settles the part for `resource` at `actual` (see
    /// [`Grant::settle_part`]).
    pub(crate) fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        match self {
            AnyGrant::Local(g) => g.settle_part(resource, actual),
            AnyGrant::Shared(g) => g.settle_part(resource, actual),
        }
    }
}

impl Limits {
    pub(crate) async fn acquire_many(
        &self,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<AnyGrant, Error> {
        match self {
            Limits::Local(l) => l.acquire_many(needs, deadline).await.map(AnyGrant::Local),
            Limits::Shared(r) => r.acquire_many(needs, deadline).await.map(AnyGrant::Shared),
        }
    }

    pub(crate) async fn try_acquire(&self, resource: &str, cost: u64) -> Result<AnyGrant, Error> {
        match self {
            Limits::Local(l) => l.try_acquire(resource, cost).map(AnyGrant::Local),
            Limits::Shared(r) => r.try_acquire(resource, cost).await.map(AnyGrant::Shared),
        }
    }

    pub(crate) async fn get_capacity(&self, resource: &str) -> Result<Capacity, Error> {
        match self {
            Limits::Local(l) => l.get_capacity(resource),
            Limits::Shared(r) => r.get_capacity(resource).await,
        }
    }

    /// The resources this process knows of (in distributed mode: those
    /// this replica used recently) whose name passes `wanted`, with their
    /// state. In distributed mode only those are read from Redis, all at
    /// once, so the batcher puts up to `max_batch` of them in one script
    /// call (a few calls for the thousands of resources a replica may
    /// know, not one round trip each).
    pub(crate) async fn capacities(&self, wanted: impl Fn(&str) -> bool) -> Vec<Capacity> {
        match self {
            Limits::Local(l) => l
                .capacities()
                .into_iter()
                .filter(|c| wanted(&c.resource))
                .collect(),
            Limits::Shared(r) => {
                let names: Vec<String> = r.resources().into_iter().filter(|n| wanted(n)).collect();
                futures_util::stream::iter(names)
                    .map(|name| async move { r.get_capacity(&name).await })
                    .buffered(r.config().max_batch.max(1))
                    .filter_map(|c| std::future::ready(c.ok()))
                    .collect()
                    .await
            }
        }
    }

    /// An upstream's answer to a call made under `grant` (see
    /// [`Limiter::observe_answer`]). In distributed mode a 429 pauses the
    /// shared resource for the Retry-After and 429s that keep coming cut
    /// its shared capacity ([`RedisLimiter::observe`]); the remaining
    /// counts of rate-limit headers are not synced into Redis.
    pub(crate) async fn observe_answer(
        &self,
        grant: &AnyGrant,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
    ) -> Result<(), Error> {
        match (self, grant) {
            (Limits::Local(l), AnyGrant::Local(g)) => {
                l.observe_answer(g, requests, tokens, status, headers)
            }
            _ => self.observe(requests, tokens, status, headers).await,
        }
    }

    /// An upstream's answer (see [`Limiter::observe`]).
    pub(crate) async fn observe(
        &self,
        requests: Option<&str>,
        tokens: Option<&str>,
        status: u16,
        headers: &RateLimitHeaders,
    ) -> Result<(), Error> {
        match self {
            Limits::Local(l) => l.observe(requests, tokens, status, headers),
            Limits::Shared(r) => r.observe(requests, tokens, status, headers).await.map(drop),
        }
    }

    /// The shared limiter, in distributed mode.
    pub(crate) fn redis(&self) -> Option<&RedisLimiter> {
        match self {
            Limits::Shared(r) => Some(r),
            Limits::Local(_) => None,
        }
    }
}
