//! [`RedisGrant`]: what an acquire took, released on drop.

use std::sync::Arc;

use sluice_limit::{Algorithm, Error, Grant};

use crate::batch::{Kind, Op, Spec};
use crate::limiter::Inner;

/// Permission to make a call, holding what it took from shared (or, while
/// Redis is away and the limiter fails open, local) resources.
///
/// Dropping it releases its in-flight slots: the release reaches Redis in
/// the background, and should it not (Redis down, replica killed), the
/// slot's lease expires instead. [`RedisGrant::settle_part`] pays the
/// actual cost, as [`sluice_limit::Grant::settle_part`] does.
#[must_use = "dropping a grant releases it at once"]
pub struct RedisGrant {
    pub(crate) inner: Arc<Inner>,
    pub(crate) parts: Vec<Held>,
    pub(crate) local: Option<Grant>,
}

#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) spec: Arc<Spec>,
    pub(crate) reserved: u64,
    pub(crate) member: String,
}

impl std::fmt::Debug for RedisGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisGrant")
            .field("parts", &self.parts().collect::<Vec<_>>())
            .field("local", &self.local.is_some())
            .finish()
    }
}

impl RedisGrant {
    /// Whether this grant came from the local fallback (Redis was away).
    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// The resources held and what each reserved (now, after any settle).
    pub fn parts(&self) -> Box<dyn Iterator<Item = (&str, u64)> + '_> {
        match &self.local {
            Some(g) => Box::new(g.parts()),
            None => Box::new(
                self.parts
                    .iter()
                    .map(|h| (h.spec.name.as_str(), h.reserved)),
            ),
        }
    }

    /// Settles every part at `actual`.
    pub fn settle(&mut self, actual: u64) {
        if let Some(g) = &mut self.local {
            g.settle(actual);
            return;
        }
        for i in 0..self.parts.len() {
            self.settle_index(i, actual);
        }
    }

    /// Settles the part for `resource` at `actual`: a smaller actual gives
    /// the difference back to the shared state, a larger one takes it (into
    /// debt if need be, never more than one window's capacity of it).
    ///
    /// # Errors
    /// [`Error::UnknownResource`] if the grant holds no such resource.
    pub fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        if let Some(g) = &mut self.local {
            return g.settle_part(resource, actual);
        }
        let i = self
            .parts
            .iter()
            .position(|h| h.spec.name == resource)
            .ok_or_else(|| Error::UnknownResource(resource.to_owned()))?;
        self.settle_index(i, actual);
        Ok(())
    }

    fn settle_index(&mut self, i: usize, actual: u64) {
        let held = &mut self.parts[i];
        // An in-flight slot is held whole until the grant goes: nothing to
        // settle (as in the in-process limiter).
        if actual == held.reserved || held.spec.limit.kind() == Algorithm::InFlight {
            return;
        }
        let old = std::mem::take(&mut held.member);
        // Logged members carry their cost; the script renames them.
        let member = if old.is_empty() {
            old.clone()
        } else {
            let base = old.rsplit_once(':').map_or(old.as_str(), |(b, _)| b);
            format!("{base}:{actual}")
        };
        self.inner.send(Op {
            kind: Kind::Settle {
                spec: held.spec.clone(),
                member: old,
                reserved: held.reserved,
                actual,
            },
            reply: None,
        });
        held.member = member;
        held.reserved = actual;
    }

    /// Releases now; the same as dropping the grant.
    pub fn release(self) {}
}

impl Drop for RedisGrant {
    fn drop(&mut self) {
        for held in &mut self.parts {
            if held.spec.limit.kind() == Algorithm::InFlight {
                self.inner.held_leases().remove(&held.member);
                self.inner.send(Op {
                    kind: Kind::Release {
                        spec: held.spec.clone(),
                        member: std::mem::take(&mut held.member),
                    },
                    reply: None,
                });
            }
        }
    }
}
