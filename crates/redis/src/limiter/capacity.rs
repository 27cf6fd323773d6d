//! What a replica reports of a resource, and its share of every limit.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sluice_limit::{Algorithm, Capacity, Error, Limit, Rules};

use super::{RedisLimiter, lock};
use crate::batch::Kind;

impl RedisLimiter {
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
        // What the upstream's headers announce is read by this replica's
        // own limiter.
        let announced = inner.local.get_capacity(resource).ok();
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
            // The shared scripts hold back the configured margin (not
            // widened after collisions: that stays with the local share).
            // An announced rate is read by this replica's own limiter and
            // cuts the shared capacity on the next 429.
            jitter_margin: inner.adaptive.jitter_margin,
            reason: (r[1] > 0).then(|| "paused for the upstream's Retry-After".to_owned()),
            announced_per_second: announced.as_ref().and_then(|c| c.announced_per_second),
            announced_in_force: announced.is_some_and(|c| c.announced_in_force),
        })
    }
}

/// Each replica's share of every limit: 1/`n`, at least 1.
pub(crate) fn share(rules: &Rules, n: u64) -> Rules {
    rules.map(|l| share_limit(l, n))
}

/// One replica's share of `l`: 1/`n`, at least 1.
pub(crate) fn share_limit(l: Limit, n: u64) -> Limit {
    let n = n.max(1);
    let burst = (l.effective_burst() / n).max(1);
    // A replica's whole share of a guess is still a guess (its limiter
    // follows an upstream announcing more; see `Inner::follow_announced`);
    // a fraction of one is not followed above.
    let l2 = Limit::new((l.capacity() / n).max(1), l.window())
        .algorithm(l.kind())
        .provisional(n == 1 && l.is_provisional());
    if matches!(l.kind(), Algorithm::TokenBucket | Algorithm::Gcra) {
        l2.burst(burst)
    } else {
        l2
    }
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
