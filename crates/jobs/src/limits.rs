//! What workers and job kinds need of a rate limiter: [`JobLimits`],
//! implemented here for the in-process [`Limiter`] and by the gateway for
//! limits shared through Redis, so that jobs take from the same buckets
//! as interactive traffic wherever those live.

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Error, Grant, Limit, Limiter};
use tokio::time::Instant;

use crate::worker::BoxFuture;

/// The limiter operations the worker runtime and the standard kinds use.
///
/// Object safe: a pool holds it as [`SharedLimits`]. Every method answers
/// as [`Limiter`]'s method of the same name does; an implementation that
/// keeps its state elsewhere (Redis) does its I/O inside the futures.
pub trait JobLimits: Send + Sync + fmt::Debug + 'static {
    /// Limits `resource` by `limit` from now on (a queue's or a group's
    /// rate, Discord's global bucket).
    ///
    /// # Errors
    /// An invalid limit, or a closed limiter.
    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error>;

    /// Whether `resource` has a limit now.
    fn contains(&self, resource: &str) -> bool;

    /// Drops a limit set by [`JobLimits::set_limit`] unless a grant or a
    /// waiter still uses it; true when `resource` is gone (or was never
    /// there), false when it was kept because it is busy.
    fn remove_idle(&self, resource: &str) -> bool;

    /// Takes one `(resource, cost)` of each at once, or nothing, without
    /// waiting.
    ///
    /// # Errors
    /// [`Error::RateLimited`] with the wait when known, and the
    /// limiter's other refusals.
    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<LimitGrant, Error>>;

    /// Waits, in FIFO order, until every `(resource, cost)` can be taken at
    /// once, or until `deadline`.
    ///
    /// # Errors
    /// [`Error::DeadlinePassed`] (with the wait when known), and the
    /// limiter's other refusals.
    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> BoxFuture<'a, Result<LimitGrant, Error>>;

    /// An upstream answered `status` with `headers` to a call made under
    /// `grant` on `resource`: keeps the bucket in step with what the
    /// upstream says it has left and, on a 429, throttles it.
    ///
    /// # Errors
    /// An unknown resource or a closed limiter.
    fn observe_answer<'a>(
        &'a self,
        grant: &'a LimitGrant,
        resource: &'a str,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> BoxFuture<'a, Result<(), Error>>;

    /// An upstream throttled `resource` (a Discord global 429): reduce its
    /// capacity and pause it for `retry_after`.
    ///
    /// # Errors
    /// An unknown resource or a closed limiter.
    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), Error>>;
}

/// What a [`JobLimits`] granted: released when dropped.
///
/// The in-process [`Grant`] is kept as it is (no allocation); other
/// limiters' grants are boxed ([`LimitGrant::new`]) and found again with
/// [`LimitGrant::downcast_ref`].
#[derive(Debug)]
#[must_use = "dropping a grant releases it at once"]
pub struct LimitGrant(Held);

enum Held {
    Local(Grant),
    Other(Box<dyn Any + Send + Sync>),
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::Local(g) => g.fmt(f),
            Held::Other(_) => f.write_str("LimitGrant(..)"),
        }
    }
}

impl LimitGrant {
    /// Wraps another limiter's grant; dropping this drops (releases) it.
    pub fn new<G: Any + Send + Sync>(grant: G) -> Self {
        LimitGrant(Held::Other(Box::new(grant)))
    }

    /// The grant wrapped by [`LimitGrant::new`] if it is a `G`.
    pub fn downcast_ref<G: Any>(&self) -> Option<&G> {
        match &self.0 {
            Held::Other(g) => g.downcast_ref(),
            Held::Local(_) => None,
        }
    }

    /// The in-process grant, if this is one.
    pub fn local(&self) -> Option<&Grant> {
        match &self.0 {
            Held::Local(g) => Some(g),
            Held::Other(_) => None,
        }
    }
}

impl From<Grant> for LimitGrant {
    fn from(grant: Grant) -> Self {
        LimitGrant(Held::Local(grant))
    }
}

impl JobLimits for Limiter {
    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        Limiter::set_limit(self, resource, limit)
    }

    fn contains(&self, resource: &str) -> bool {
        Limiter::contains(self, resource)
    }

    fn remove_idle(&self, resource: &str) -> bool {
        let busy = self
            .get_capacity(resource)
            .is_ok_and(|c| c.in_flight > 0 || c.waiting > 0);
        if !busy {
            self.remove(resource);
        }
        !busy
    }

    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<LimitGrant, Error>> {
        let granted = Limiter::try_acquire_many(self, needs).map(LimitGrant::from);
        Box::pin(std::future::ready(granted))
    }

    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> BoxFuture<'a, Result<LimitGrant, Error>> {
        Box::pin(async move {
            Limiter::acquire_many(self, needs, deadline)
                .await
                .map(LimitGrant::from)
        })
    }

    fn observe_answer<'a>(
        &'a self,
        grant: &'a LimitGrant,
        resource: &'a str,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let done = match grant.local() {
            Some(g) => Limiter::observe_answer(self, g, Some(resource), None, status, headers),
            None => self.observe(Some(resource), None, status, headers),
        };
        Box::pin(std::future::ready(done))
    }

    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let done = Limiter::report_throttled(self, resource, retry_after).map(drop);
        Box::pin(std::future::ready(done))
    }
}

/// A [`JobLimits`] shared by a pool and its handlers: cheap to clone.
///
/// Made from a [`Limiter`] (or `&Limiter`) with `into()`, or from any
/// other implementation with [`SharedLimits::new`].
#[derive(Debug, Clone)]
pub struct SharedLimits(Arc<dyn JobLimits>);

impl SharedLimits {
    /// Shares `limits`.
    pub fn new(limits: impl JobLimits) -> Self {
        SharedLimits(Arc::new(limits))
    }
}

impl Deref for SharedLimits {
    type Target = dyn JobLimits;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl From<Limiter> for SharedLimits {
    fn from(limiter: Limiter) -> Self {
        SharedLimits::new(limiter)
    }
}

impl From<&Limiter> for SharedLimits {
    fn from(limiter: &Limiter) -> Self {
        SharedLimits::new(limiter.clone())
    }
}

impl From<Arc<dyn JobLimits>> for SharedLimits {
    fn from(limits: Arc<dyn JobLimits>) -> Self {
        SharedLimits(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_limit::Rules;

    #[tokio::test]
    async fn the_in_process_limiter_answers_through_the_trait() {
        let limiter = Limiter::new(Rules::new()).unwrap();
        let limits: SharedLimits = (&limiter).into();
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
        assert!(!limits.remove_idle("jobs:q"), "held grants keep it");
        drop((a, b));
        assert!(limits.remove_idle("jobs:q"));
        assert!(!limits.contains("jobs:q"));
    }

    #[tokio::test]
    async fn an_in_flight_resource_in_use_is_kept() {
        let limiter = Limiter::new(Rules::new()).unwrap();
        let limits = SharedLimits::from(limiter);
        limits.set_limit("slots", Limit::in_flight(1)).unwrap();
        let held = limits.try_acquire_many(&[("slots", 1)]).await.unwrap();
        assert!(!limits.remove_idle("slots"), "a held slot keeps it");
        assert!(limits.contains("slots"));
        drop(held);
        assert!(limits.remove_idle("slots"));
    }

    #[test]
    fn other_grants_are_found_again() {
        let g = LimitGrant::new(7_u32);
        assert_eq!(g.downcast_ref::<u32>(), Some(&7));
        assert_eq!(g.downcast_ref::<u64>(), None);
        assert!(g.local().is_none());
    }
}
