//! Limits set at run time, ahead of the rules.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use sluice_limit::{Error, Limit};

use super::{RedisLimiter, lock, share_limit};
use crate::batch::Spec;

/// The most limits set at run time: they cannot be evicted (they are
/// configuration), so past this [`RedisLimiter::set_limit`] refuses.
pub const MAX_SET_LIMITS: usize = 65_536;

impl RedisLimiter {
    /// Limits `resource` by `limit` from now on, ahead of the rules (as
    /// [`sluice_limit::Limiter::set_limit`] does in-process): for resources configured
    /// at run time, such as a job queue's rate. Every replica that shares
    /// the resource must set the same limit; the state in Redis is kept
    /// and read under the new limit. The local share (used while Redis is
    /// away) gets its 1/N of it.
    ///
    /// # Errors
    /// An invalid `limit` (as [`Limit::validate`]), [`Error::Closed`],
    /// [`Error::RateLimited`] on `resource` when [`MAX_SET_LIMITS`] other
    /// resources are already set (remove some).
    pub fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        limit.validate()?;
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        {
            let mut overrides = lock(&inner.overrides);
            if overrides.len() >= MAX_SET_LIMITS && !overrides.contains_key(resource) {
                return Err(Error::RateLimited {
                    resource: resource.to_owned(),
                    retry_after: None,
                });
            }
            overrides.insert(resource.to_owned(), limit);
        }
        lock(&inner.specs).insert(
            resource.to_owned(),
            Arc::new(Spec::new(
                resource.to_owned(),
                limit,
                inner.header.margin_us,
            )),
        );
        // The local share follows, for when Redis goes away.
        let _ = inner
            .local
            .set_limit(resource, share_limit(limit, self.replicas()));
        // Whatever this replica believed (refusals, a leased block) was
        // under the old limit.
        inner.forget(resource);
        Ok(())
    }

    /// Drops a limit set by [`RedisLimiter::set_limit`]: `resource` goes
    /// back to the rules. Grants and waiters already under way keep the
    /// limit they started with. Returns whether one was set.
    pub fn remove(&self, resource: &str) -> bool {
        let inner = &self.inner;
        let removed = lock(&inner.overrides).remove(resource).is_some();
        if removed {
            lock(&inner.specs).remove(resource);
            inner.local.remove(resource);
            inner.forget(resource);
        }
        removed
    }

    /// Whether `resource` has a limit: set by [`RedisLimiter::set_limit`]
    /// or matched by a rule.
    pub fn contains(&self, resource: &str) -> bool {
        lock(&self.inner.overrides).contains_key(resource)
            || self.inner.rules.resolve(resource).is_some()
    }
}
