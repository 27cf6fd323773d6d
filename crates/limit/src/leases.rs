//! Grants held by id on a caller's behalf, with leases that expire, for
//! callers that track grants across an API rather than in memory.

use std::collections::HashMap;
use std::time::Duration;

use crate::Error;
use crate::grant::Grant;
use crate::limiter::Limiter;
use crate::meter::Nanos;
use crate::resource::{lock, nanos};

/// The id of a grant held by the limiter on a caller's behalf
/// ([`Limiter::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GrantId(pub u64);

impl std::fmt::Display for GrantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Default)]
pub(crate) struct Leases {
    next: u64,
    held: HashMap<u64, (Grant, Nanos)>,
}

impl Limiter {
    /// Keeps `grant` on the caller's behalf for up to `ttl`, for callers that
    /// track grants by id (across an HTTP API, say). A lease that is neither
    /// released nor renewed in time is released by the next sweep.
    pub fn hold(&self, grant: Grant, ttl: Duration) -> GrantId {
        let expires = self.inner.shared.now().saturating_add(nanos(ttl));
        let mut leases = lock(&self.inner.leases);
        leases.next += 1;
        let id = leases.next;
        leases.held.insert(id, (grant, expires));
        GrantId(id)
    }

    /// Releases a held grant, settling it first at `actual` when given.
    ///
    /// # Errors
    /// [`Error::UnknownGrant`] if it was released already or its lease ran
    /// out.
    pub fn release(&self, id: GrantId, actual: Option<u64>) -> Result<(), Error> {
        let now = self.inner.shared.now();
        let held = lock(&self.inner.leases).held.remove(&id.0);
        match held {
            Some((mut grant, expires)) if expires > now => {
                if let Some(actual) = actual {
                    grant.settle(actual);
                }
                Ok(())
            }
            _ => Err(Error::UnknownGrant(id.0)),
        }
    }

    /// Extends a held grant's lease to `ttl` from now.
    ///
    /// # Errors
    /// [`Error::UnknownGrant`].
    pub fn renew(&self, id: GrantId, ttl: Duration) -> Result<(), Error> {
        let now = self.inner.shared.now();
        let mut leases = lock(&self.inner.leases);
        match leases.held.get_mut(&id.0) {
            Some((_, expires)) if *expires > now => {
                *expires = now.saturating_add(nanos(ttl));
                Ok(())
            }
            _ => Err(Error::UnknownGrant(id.0)),
        }
    }

    /// Grants held by id.
    pub fn held(&self) -> usize {
        lock(&self.inner.leases).held.len()
    }

    /// Releases held grants whose lease ran out; how many.
    pub(crate) fn expire_leases(&self, now: Nanos) -> usize {
        let expired: Vec<Grant> = {
            let mut leases = lock(&self.inner.leases);
            let ids: Vec<u64> = leases
                .held
                .iter()
                .filter(|(_, (_, exp))| *exp <= now)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| leases.held.remove(id))
                .map(|(g, _)| g)
                .collect()
        };
        // Dropped here, outside the lease table's lock.
        expired.len()
    }
}
