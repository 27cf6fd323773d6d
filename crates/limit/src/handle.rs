//! [`Handle`]: a resource looked up once, for hot paths.

use std::sync::Arc;
use std::time::Duration;

use crate::acquire::{Acquire, Need};
use crate::grant::{Grant, Held, Parts};
use crate::limiter::{Inner, Limiter};
use crate::meter::Nanos;
use crate::resource::Resource;
use crate::{Capacity, Error};

/// One resource, resolved once: its calls skip the name look-up.
///
/// A live handle keeps its resource from being evicted. If the resource is
/// removed ([`Limiter::remove`]), the handle's calls fail with
/// [`Error::Closed`]; look it up again.
///
/// ```
/// # use sluice_limit::{Limit, Limiter, Rules};
/// let limiter = Limiter::new(Rules::new().exact("api:github", Limit::per_second(5)))?;
/// let github = limiter.handle("api:github")?;
/// assert!(github.check(1).is_ok());
/// # Ok::<(), sluice_limit::Error>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Inner>,
    resource: Arc<Resource>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("resource", &self.resource.name)
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A handle on `resource`, created from its rule if need be.
    ///
    /// # Errors
    /// [`Error::UnknownResource`], [`Error::Closed`].
    pub fn handle(&self, resource: &str) -> Result<Handle, Error> {
        Ok(Handle {
            inner: self.inner.clone(),
            resource: self.inner.resource(resource)?,
        })
    }
}

impl Handle {
    /// The resource's name.
    pub fn name(&self) -> &str {
        &self.resource.name
    }

    /// As [`Limiter::check`].
    ///
    /// # Errors
    /// As [`Limiter::check`].
    #[inline]
    pub fn check(&self, cost: u64) -> Result<(), Error> {
        check(&self.inner, &self.resource, cost)
    }

    /// As [`Limiter::try_acquire`].
    ///
    /// # Errors
    /// As [`Limiter::try_acquire`].
    #[inline]
    pub fn try_acquire(&self, cost: u64) -> Result<Grant, Error> {
        try_acquire(&self.inner, self.resource.clone(), cost)
    }

    /// As [`Limiter::acquire`].
    pub fn acquire(&self, cost: u64, deadline: Option<tokio::time::Instant>) -> Acquire {
        let need = Need {
            resource: self.resource.clone(),
            cost,
        };
        Acquire::new(self.inner.clone(), Ok(vec![need]), deadline)
    }

    /// As [`Limiter::get_capacity`].
    pub fn capacity(&self) -> Capacity {
        let now = self.inner.shared.now();
        let mut st = self.resource.lock();
        st.tick(now, &self.inner.shared, &self.resource.name);
        let cap = st.capacity(&self.resource.name, now, &self.inner.shared);
        drop(st);
        self.inner.shared.dispatch();
        cap
    }
}

#[inline]
pub(crate) fn check(inner: &Inner, res: &Resource, cost: u64) -> Result<(), Error> {
    check_at(inner, res, inner.shared.now(), cost)
}

/// Takes `cost` at `now`: on the lock-free path if it is open, else under
/// the lock.
#[inline]
pub(crate) fn check_at(inner: &Inner, res: &Resource, now: Nanos, cost: u64) -> Result<(), Error> {
    match res.try_take(now, cost) {
        Some(Ok(())) => Ok(()),
        Some(Err(wait)) => Err(refused(&res.name, wait)),
        None => check_locked(inner, res, now, cost),
    }
}

/// [`check_at`] under the lock: out of line, to keep the fast path small.
#[cold]
#[inline(never)]
fn check_locked(inner: &Inner, res: &Resource, now: Nanos, cost: u64) -> Result<(), Error> {
    let taken = inner.take_now(res, now, cost, false);
    inner.shared.dispatch();
    taken.map(|_| ())
}

/// A refusal on the lock-free path.
#[cold]
pub(crate) fn refused(resource: &str, wait: Nanos) -> Error {
    Error::RateLimited {
        resource: resource.to_owned(),
        retry_after: Some(Duration::from_nanos(wait)),
    }
}

#[inline]
pub(crate) fn try_acquire(inner: &Inner, res: Arc<Resource>, cost: u64) -> Result<Grant, Error> {
    let now = inner.shared.now();
    if let Some(out) = try_grant_fast(&res, now, cost) {
        return out.map(|(stamp, taken)| grant(res, cost, stamp, taken));
    }
    let taken = inner.take_now(&res, now, cost, true);
    inner.shared.dispatch();
    taken.map(|(stamp, taken)| grant(res, cost, stamp, taken))
}

/// [`try_acquire`] on a resource a thread's cache remembered: `None` if
/// it is stale (see [`Inner::take_cached`]).
#[inline]
pub(crate) fn try_acquire_cached(
    inner: &Inner,
    res: Arc<Resource>,
    cost: u64,
) -> Option<Result<Grant, Error>> {
    let now = inner.shared.now();
    // A stale resource was dropped from the map, which shut its path for
    // good: it always comes to the lock, which tells.
    if let Some(out) = try_grant_fast(&res, now, cost) {
        return Some(out.map(|(stamp, taken)| grant(res, cost, stamp, taken)));
    }
    let taken = inner.take_cached(&res, now, cost)?;
    inner.shared.dispatch();
    Some(taken.map(|(stamp, taken)| grant(res, cost, stamp, taken)))
}

/// A grant on the lock-free path: its stamp and what was taken right
/// after it; `None` when the lock must decide.
#[inline]
fn try_grant_fast(res: &Resource, now: Nanos, cost: u64) -> Option<Result<(Nanos, u64), Error>> {
    Some(match res.try_grant(now, cost)? {
        Ok(taken) => Ok((now, taken)),
        Err(wait) => Err(refused(&res.name, wait)),
    })
}

#[inline]
fn grant(res: Arc<Resource>, cost: u64, stamp: Nanos, taken: u64) -> Grant {
    Grant {
        parts: Parts::One(Held {
            resource: res,
            reserved: cost,
            stamp,
            taken,
        }),
    }
}
