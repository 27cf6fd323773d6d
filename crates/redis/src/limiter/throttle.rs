//! Upstream 429s and rate-limit headers: pause, cut, announce on the bus.

use std::time::Duration;

use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{CapacityChange, ChangeReason, Error, Policy};
use tokio::time::Instant;

use super::{RedisLimiter, lock};
use crate::bus::CapacityUpdate;
use crate::conn::Unavailable;

impl RedisLimiter {
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
        if let Some(r) = requests {
            inner.sync_margin(r, status == 429);
        }
        let Some(resource) = requests.or(tokens.filter(|_| status == 429)) else {
            return Ok(None);
        };
        let cfg = inner.adaptive;
        if status != 429 {
            if status < 400 {
                lock(&inner.strikes).remove(resource);
                inner.follow_announced(resource);
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
        // it, recovering at the seed's pace; a 429 beyond it cuts to it
        // again, never below. Only once this replica's own limiter follows
        // the announcement, that is when it is clearly below the rate in
        // force: an estimate within the headers' rounding of the
        // configured rate (24.6/s announced of 25/s configured) is the
        // configured rate, and a collision there only pauses. Cutting to
        // its low end, rounded down, held 25/s at 24/s for 30 s a time.
        let spec = inner.spec(resource)?;
        if let Some(target) = inner
            .local
            .get_capacity(resource)
            .ok()
            .filter(|c| c.announced_in_force)
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
        let script = redis::Script::new(include_str!("../../lua/throttle.lua"));
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
            announced_by: None,
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
