//! Where limits live: in this process ([`Limiter`]) or, with `[redis]`
//! configured, shared by every replica through Redis ([`RedisLimiter`]).
//! The smallest surface the gateway needs over both; the in-process arm
//! calls straight through.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Capacity, Error, Grant, GrantId, Limiter};
use sluice_redis::{RedisGrant, RedisLimiter};
use tokio::time::Instant;

/// The gateway's limits.
#[derive(Debug)]
pub(crate) enum Limits {
    /// One process: the in-process limiter.
    Local(Limiter),
    /// Several replicas: Redis, plus grants held for the limiter API.
    Shared(RedisLimiter, Holds),
}

/// A grant from either.
#[derive(Debug)]
pub(crate) enum AnyGrant {
    Local(Grant),
    Shared(RedisGrant),
}

impl AnyGrant {
    /// Settles the part for `resource` at `actual` (see
    /// [`Grant::settle_part`]).
    pub(crate) fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        match self {
            AnyGrant::Local(g) => g.settle_part(resource, actual),
            AnyGrant::Shared(g) => g.settle_part(resource, actual),
        }
    }
}

/// Grants held for callers of `POST /v1/limits/acquire` in distributed
/// mode, by id, until released or expired. Ids are this replica's: a
/// release must reach the replica that granted (the lease TTL frees the
/// slot otherwise).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    next: AtomicU64,
    held: Mutex<HashMap<u64, (RedisGrant, Instant)>>,
}

/// Drops (so releases) the holds whose TTL has passed.
fn expire(held: &mut HashMap<u64, (RedisGrant, Instant)>, now: Instant) {
    held.retain(|_, (_, until)| *until > now);
}

/// The most grants held for the limiter API at once per replica.
const MAX_HOLDS: usize = 100_000;

impl Limits {
    pub(crate) async fn acquire_many(
        &self,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<AnyGrant, Error> {
        match self {
            Limits::Local(l) => l.acquire_many(needs, deadline).await.map(AnyGrant::Local),
            Limits::Shared(r, _) => r.acquire_many(needs, deadline).await.map(AnyGrant::Shared),
        }
    }

    pub(crate) async fn try_acquire(&self, resource: &str, cost: u64) -> Result<AnyGrant, Error> {
        match self {
            Limits::Local(l) => l.try_acquire(resource, cost).map(AnyGrant::Local),
            Limits::Shared(r, _) => r.try_acquire(resource, cost).await.map(AnyGrant::Shared),
        }
    }

    pub(crate) async fn get_capacity(&self, resource: &str) -> Result<Capacity, Error> {
        match self {
            Limits::Local(l) => l.get_capacity(resource),
            Limits::Shared(r, _) => r.get_capacity(resource).await,
        }
    }

    /// Every resource this process knows of (in distributed mode: those
    /// this replica used recently), with its state.
    pub(crate) async fn capacities(&self) -> Vec<Capacity> {
        match self {
            Limits::Local(l) => l.capacities(),
            Limits::Shared(r, _) => {
                let mut out = Vec::new();
                for name in r.resources() {
                    if let Ok(c) = r.get_capacity(&name).await {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// An upstream's answer to a call made under `grant` (see
    /// [`Limiter::observe_answer`]). In distributed mode a 429 reduces the
    /// shared capacity and pauses it for the Retry-After; the remaining
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
            Limits::Shared(r, _) => {
                if status == 429
                    && let Some(resource) = requests.or(tokens)
                {
                    r.report_throttled(resource, headers.throttle_wait())
                        .await?;
                }
                Ok(())
            }
        }
    }

    /// Keeps `grant` for a caller of the limiter API for `ttl`.
    pub(crate) fn hold(&self, grant: AnyGrant, ttl: Duration) -> Result<GrantId, Error> {
        match (self, grant) {
            (Limits::Local(l), AnyGrant::Local(g)) => Ok(l.hold(g, ttl)),
            (Limits::Shared(_, holds), AnyGrant::Shared(g)) => {
                let now = Instant::now();
                let mut held = holds.held.lock().unwrap_or_else(|e| e.into_inner());
                if held.len() >= MAX_HOLDS {
                    // Full: make room from the expired before refusing.
                    expire(&mut held, now);
                }
                if held.len() >= MAX_HOLDS {
                    return Err(Error::RateLimited {
                        resource: "limits_api_holds".into(),
                        retry_after: Some(Duration::from_secs(1)),
                    });
                }
                let id = holds.next.fetch_add(1, Ordering::Relaxed) + 1;
                held.insert(id, (g, now + ttl));
                Ok(GrantId(id))
            }
            _ => Err(Error::Closed),
        }
    }

    /// Drops the held grants whose TTL has passed, which releases them;
    /// the gateway calls it every second in distributed mode (the local
    /// limiter expires its own holds).
    pub(crate) fn expire_holds(&self) {
        if let Limits::Shared(_, holds) = self {
            let mut held = holds.held.lock().unwrap_or_else(|e| e.into_inner());
            expire(&mut held, Instant::now());
        }
    }

    /// Releases a held grant, settling it at `actual` first if given.
    pub(crate) fn release(&self, id: GrantId, actual: Option<u64>) -> Result<(), Error> {
        match self {
            Limits::Local(l) => l.release(id, actual),
            Limits::Shared(_, holds) => {
                let now = Instant::now();
                let held = holds
                    .held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id.0);
                match held {
                    Some((mut g, until)) if until > now => {
                        if let Some(a) = actual {
                            g.settle(a);
                        }
                        Ok(())
                    }
                    _ => Err(Error::UnknownGrant(id.0)),
                }
            }
        }
    }

    /// The shared limiter, in distributed mode.
    pub(crate) fn redis(&self) -> Option<&RedisLimiter> {
        match self {
            Limits::Shared(r, _) => Some(r),
            Limits::Local(_) => None,
        }
    }
}
