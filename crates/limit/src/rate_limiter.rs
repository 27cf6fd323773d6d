//! [`RateLimiter`]: what callers need of a limiter, wherever its state
//! lives (this process, or Redis in `sluice-redis`), so that the gateway
//! and the job workers hold one [`SharedLimiter`] and no glue per kind.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::headers::RateLimitHeaders;
use crate::{Capacity, Error, Limit, LimitFuture, Limiter, Permit};

/// A rate limiter behind a pointer: the in-process [`Limiter`] (made with
/// `into()` from a `Limiter` or a `&Limiter`) or any other
/// [`RateLimiter`].
pub type SharedLimiter = Arc<dyn RateLimiter>;

/// The limiter operations the gateway and the job workers use.
///
/// A call goes: acquire its resources with their costs, until a deadline
/// ([`acquire_many`](RateLimiter::acquire_many), or
/// [`try_acquire_many`](RateLimiter::try_acquire_many) without waiting);
/// make the call under the [`Permit`]; settle what it really cost
/// ([`Permit::settle`], [`Permit::settle_part`]); report the upstream's
/// answer ([`observe`](RateLimiter::observe)); drop the permit to release
/// it (a cancelled call releases it too).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), sluice_limit::Error> {
/// use std::time::Duration;
/// use sluice_limit::headers::RateLimitHeaders;
/// use sluice_limit::{Limit, Limiter, Rules, SharedLimiter};
///
/// let rules = Rules::new()
///     .exact("model:m", Limit::per_second(10))
///     .exact("tokens:m", Limit::per_minute(10_000));
/// let limits: SharedLimiter = Limiter::new(rules)?.into();
/// let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
/// let needs = [("model:m", 1), ("tokens:m", 500)];
/// let mut permit = limits.acquire_many(&needs, Some(deadline)).await?;
/// // ... the call, which used 120 tokens of the 500 reserved ...
/// permit.settle_part("tokens:m", 120)?;
/// let answer = RateLimitHeaders::default();
/// limits
///     .observe(Some(&permit), Some("model:m"), Some("tokens:m"), 200, &answer)
///     .await?;
/// drop(permit); // released
/// # Ok(()) }
/// ```
///
/// Object safe: callers hold a [`SharedLimiter`]. Every method answers as
/// [`Limiter`]'s method of the same name does; an implementation that
/// keeps its state elsewhere (`sluice-redis`) does its I/O inside the
/// returned futures.
pub trait RateLimiter: Send + Sync + fmt::Debug {
    /// Waits, in FIFO order, until every `(resource, cost)` can be taken
    /// at once, or until `deadline` (`None` waits as long as it takes).
    ///
    /// # Errors
    /// [`Error::DeadlinePassed`] (with the wait when known),
    /// [`Error::InsufficientCapacity`], [`Error::UnknownResource`],
    /// [`Error::Closed`].
    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> LimitFuture<'a, Result<Permit, Error>>;

    /// Takes one `(resource, cost)` of each at once, or nothing, without
    /// waiting.
    ///
    /// # Errors
    /// [`Error::RateLimited`] with the wait when known, and the refusals
    /// of [`RateLimiter::acquire_many`].
    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> LimitFuture<'a, Result<Permit, Error>>;

    /// The state of `resource`.
    ///
    /// # Errors
    /// [`Error::UnknownResource`] when no rule matches, [`Error::Closed`].
    fn get_capacity<'a>(&'a self, resource: &'a str) -> LimitFuture<'a, Result<Capacity, Error>>;

    /// The state of the live resources whose name passes `wanted`, by
    /// name (for a limiter shared by replicas: those this one used
    /// recently).
    fn capacities<'a>(
        &'a self,
        wanted: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> LimitFuture<'a, Vec<Capacity>>;

    /// An upstream answered `status` with `headers` to a call on
    /// `requests` (and `tokens`), made under `grant` when it is given:
    /// keeps the resources in step with what the upstream says it has
    /// left and, on a 429, throttles them (see [`Limiter::observe`] and
    /// [`Limiter::observe_answer`]).
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    fn observe<'a>(
        &'a self,
        grant: Option<&'a Permit>,
        requests: Option<&'a str>,
        tokens: Option<&'a str>,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> LimitFuture<'a, Result<(), Error>>;

    /// An upstream throttled `resource`: cut its capacity and pause it for
    /// `retry_after` (see [`Limiter::report_throttled`]).
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> LimitFuture<'a, Result<(), Error>>;

    /// Limits `resource` by `limit` from now on (a job queue's or group's
    /// rate, Discord's global bucket).
    ///
    /// # Errors
    /// An invalid limit, or a closed limiter.
    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error>;

    /// Whether `resource` has a limit now.
    fn contains(&self, resource: &str) -> bool;

    /// Drops a limit set by [`RateLimiter::set_limit`] unless a grant or a
    /// waiter still uses it; true when `resource` is gone (or was never
    /// there), false when it was kept because it is busy.
    fn remove_idle(&self, resource: &str) -> bool;
}

impl RateLimiter for Limiter {
    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        Limiter::acquire_many(self, needs, deadline).into()
    }

    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        let granted = match needs {
            // One resource takes the handle's path: no list of locks.
            [(resource, cost)] => Limiter::try_acquire(self, resource, *cost),
            _ => Limiter::try_acquire_many(self, needs),
        };
        LimitFuture::ready(granted.map(Permit::from))
    }

    fn get_capacity<'a>(&'a self, resource: &'a str) -> LimitFuture<'a, Result<Capacity, Error>> {
        LimitFuture::ready(Limiter::get_capacity(self, resource))
    }

    fn capacities<'a>(
        &'a self,
        wanted: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> LimitFuture<'a, Vec<Capacity>> {
        let mut all = Limiter::capacities(self);
        all.retain(|c| wanted(&c.resource));
        LimitFuture::ready(all)
    }

    fn observe<'a>(
        &'a self,
        grant: Option<&'a Permit>,
        requests: Option<&'a str>,
        tokens: Option<&'a str>,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> LimitFuture<'a, Result<(), Error>> {
        LimitFuture::ready(match grant.and_then(Permit::local) {
            Some(g) => Limiter::observe_answer(self, g, requests, tokens, status, headers),
            None => Limiter::observe(self, requests, tokens, status, headers),
        })
    }

    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> LimitFuture<'a, Result<(), Error>> {
        LimitFuture::ready(Limiter::report_throttled(self, resource, retry_after).map(drop))
    }

    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        Limiter::set_limit(self, resource, limit)
    }

    fn contains(&self, resource: &str) -> bool {
        Limiter::contains(self, resource)
    }

    fn remove_idle(&self, resource: &str) -> bool {
        let busy =
            Limiter::get_capacity(self, resource).is_ok_and(|c| c.in_flight > 0 || c.waiting > 0);
        if !busy {
            self.remove(resource);
        }
        !busy
    }
}

impl From<Limiter> for SharedLimiter {
    fn from(limiter: Limiter) -> Self {
        Arc::new(limiter)
    }
}

impl From<&Limiter> for SharedLimiter {
    fn from(limiter: &Limiter) -> Self {
        Arc::new(limiter.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rules;

    #[tokio::test]
    async fn the_in_process_limiter_answers_through_the_trait() {
        let limiter = Limiter::new(Rules::new()).unwrap();
        let limits: SharedLimiter = (&limiter).into();
        assert!(!limits.contains("jobs:q"));
        limits
            .set_limit(
                "jobs:q",
                Limit::sliding_window(2, Duration::from_secs(3600)),
            )
            .unwrap();
        assert!(limits.contains("jobs:q") && limiter.contains("jobs:q"));
        let a = limits.try_acquire_many(&[("jobs:q", 1)]).await.unwrap();
        assert!(a.local().is_some());
        let b = limits.acquire_many(&[("jobs:q", 1)], None).await.unwrap();
        assert!(matches!(
            limits.try_acquire_many(&[("jobs:q", 1)]).await,
            Err(Error::RateLimited { .. })
        ));
        let past = Some(Instant::now());
        assert!(matches!(
            limits.acquire_many(&[("jobs:q", 1)], past).await,
            Err(Error::DeadlinePassed { .. })
        ));
        assert_eq!(limits.get_capacity("jobs:q").await.unwrap().in_flight, 2);
        assert!(!limits.remove_idle("jobs:q"), "held grants keep it");
        drop((a, b));
        assert!(limits.remove_idle("jobs:q"));
        assert!(!limits.contains("jobs:q"));
    }

    #[tokio::test]
    async fn an_in_flight_resource_in_use_is_kept() {
        let limiter = Limiter::new(Rules::new()).unwrap();
        let limits = SharedLimiter::from(limiter);
        limits.set_limit("slots", Limit::in_flight(1)).unwrap();
        let held = limits.try_acquire_many(&[("slots", 1)]).await.unwrap();
        assert!(!limits.remove_idle("slots"), "a held slot keeps it");
        assert!(limits.contains("slots"));
        drop(held);
        assert!(limits.remove_idle("slots"));
    }

    #[tokio::test]
    async fn capacities_are_filtered_and_answers_reach_the_resource() {
        let limiter = Limiter::new(Rules::new()).unwrap();
        let limits = SharedLimiter::from(&limiter);
        limits.set_limit("api:a", Limit::per_second(10)).unwrap();
        limits
            .set_limit("session:x", Limit::per_second(10))
            .unwrap();
        let seen = limits.capacities(&|r| r.starts_with("api:")).await;
        let names: Vec<_> = seen.iter().map(|c| c.resource.as_str()).collect();
        assert_eq!(names, ["api:a"]);
        let mut permit = limits.try_acquire_many(&[("api:a", 3)]).await.unwrap();
        permit.settle_part("api:a", 1).unwrap();
        let throttled = RateLimitHeaders {
            retry_after: Some(Duration::from_secs(5)),
            ..RateLimitHeaders::default()
        };
        limits
            .observe(Some(&permit), Some("api:a"), None, 429, &throttled)
            .await
            .unwrap();
        assert!(limiter.get_capacity("api:a").unwrap().paused_for.is_some());
        limits.report_throttled("api:a", None).await.unwrap();
        assert!(limiter.get_capacity("api:a").unwrap().total < 10);
    }
}
