//! [`Grant`]: what an acquire took, released on drop.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::Error;
use crate::meter::Stamp;
use crate::resource::Resource;

/// Permission to make a call, holding what it took from one or more
/// resources.
///
/// Dropping it releases its in-flight slots (tokens of rate limits stay
/// spent: time gives them back). [`Grant::settle`] replaces the reserved cost
/// by the actual one, refunding or debiting the difference, so an LLM call
/// can reserve `prompt + max_tokens` and pay for what it used.
#[derive(Debug)]
#[must_use = "dropping a grant releases it at once"]
pub struct Grant {
    pub(crate) parts: Parts,
}

/// A grant's parts: one held inline (a grant on one resource, the common
/// case, allocates nothing), or several.
#[derive(Debug)]
pub(crate) enum Parts {
    One(Held),
    Many(Vec<Held>),
}

impl From<Vec<Held>> for Parts {
    fn from(mut parts: Vec<Held>) -> Parts {
        if parts.len() == 1
            && let Some(one) = parts.pop()
        {
            return Parts::One(one);
        }
        Parts::Many(parts)
    }
}

impl std::ops::Deref for Parts {
    type Target = [Held];

    #[inline]
    fn deref(&self) -> &[Held] {
        match self {
            Parts::One(h) => std::slice::from_ref(h),
            Parts::Many(v) => v,
        }
    }
}

impl std::ops::DerefMut for Parts {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Held] {
        match self {
            Parts::One(h) => std::slice::from_mut(h),
            Parts::Many(v) => v,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) resource: Arc<Resource>,
    pub(crate) reserved: u64,
    pub(crate) stamp: Stamp,
    /// The resource's running total of what was taken, right after this
    /// grant's take: what an upstream's answer to this call is compared
    /// with (see [`Limiter::observe_answer`](crate::Limiter::observe_answer)).
    pub(crate) taken: u64,
}

impl Grant {
    /// What this grant holds of `resource`: only the same resource object
    /// counts (one evicted and created again since is another).
    pub(crate) fn held(&self, resource: &Arc<Resource>) -> Option<&Held> {
        self.parts
            .iter()
            .find(|h| Arc::ptr_eq(&h.resource, resource))
    }

    /// The resources held and what each reserved (now, after any settle).
    pub fn parts(&self) -> impl Iterator<Item = (&str, u64)> {
        self.parts.iter().map(|h| (&*h.resource.name, h.reserved))
    }

    /// The cost reserved on the first (for single-resource grants, the
    /// only) resource.
    pub fn cost(&self) -> u64 {
        self.parts.first().map_or(0, |h| h.reserved)
    }

    /// Settles every part at `actual`: a smaller actual refunds the
    /// difference (never above the resource's maximum), a larger one debits
    /// it, even into debt, but never more than one window's capacity of
    /// debt. Settling at the reserved cost, or an in-flight part, changes
    /// nothing.
    pub fn settle(&mut self, actual: u64) {
        for i in 0..self.parts.len() {
            self.settle_index(i, actual);
        }
    }

    /// Settles the part for `resource` at `actual`.
    ///
    /// # Errors
    /// [`Error::UnknownResource`] if the grant holds no such resource.
    pub fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        let i = self
            .parts
            .iter()
            .position(|h| &*h.resource.name == resource)
            .ok_or_else(|| Error::UnknownResource(resource.to_owned()))?;
        self.settle_index(i, actual);
        Ok(())
    }

    fn settle_index(&mut self, i: usize, actual: u64) {
        let held = &mut self.parts[i];
        // An in-flight slot is held whole until the grant goes: there is
        // no cost to settle, and counting one would let a settle take
        // (or free) slots other grants hold.
        if actual == held.reserved
            || held.resource.lock().limit.kind() == crate::Algorithm::InFlight
        {
            return;
        }
        let now = held.resource.shared.now();
        let mut st = held.resource.lock();
        st.adjust(
            now,
            held.stamp,
            i128::from(actual) - i128::from(held.reserved),
        );
        if actual < held.reserved {
            // Freed capacity may let the head go sooner.
            st.wake_head();
        }
        held.reserved = actual;
    }

    /// Releases now; the same as dropping the grant.
    pub fn release(self) {}
}

impl Drop for Grant {
    fn drop(&mut self) {
        for held in self.parts.iter() {
            let res = &held.resource;
            // Open, the path says that nothing needs the lock: a bucket
            // nobody waits on (an in-flight limit never opens it). Counted
            // out, the grant is gone; if it was the last, takes stop
            // counting themselves.
            if res.fast.is_open() {
                res.in_flight.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let now = res.shared.now();
            res.lock().release(now, held.reserved);
        }
    }
}
