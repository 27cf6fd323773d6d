//! Deficit round robin across tenants, with unit costs.
//!
//! Every queued entry costs one dispatch. A tenant with weight `w` is served
//! `w` entries per turn; turns rotate through the tenants that have entries
//! queued, so while `k` tenants stay backlogged each gets `w / Σw` of the
//! dispatches, and after any number `n` of dispatches a tenant's count differs
//! from `n · w / Σw` by less than its own weight. A tenant whose queue
//! empties is dropped (its deficit with it, as DRR prescribes), so idle
//! tenants cost no memory and cannot bank credit for later.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// An entry's identity in the queue.
pub(crate) type EntryId = u64;

#[derive(Debug)]
struct TenantQueue {
    /// Entries served per turn.
    weight: u32,
    /// Entries still to serve in the current turn; 0 when no turn is running.
    deficit: u32,
    entries: VecDeque<EntryId>,
}

/// One class's fair queue.
#[derive(Debug, Default)]
pub(crate) struct Drr {
    /// Tenants with entries, in turn order; the front one is being served.
    active: VecDeque<Arc<str>>,
    tenants: HashMap<Arc<str>, TenantQueue>,
    len: usize,
}

impl Drr {
    /// Queues `id` at the back of `tenant`'s line. A tenant new to the queue
    /// takes its turn after those already waiting. `weight` is read only
    /// when the tenant has nothing queued yet.
    pub(crate) fn push(&mut self, tenant: &Arc<str>, weight: u32, id: EntryId) {
        let queue = self.tenants.entry(Arc::clone(tenant)).or_insert_with(|| {
            self.active.push_back(Arc::clone(tenant));
            TenantQueue {
                weight: weight.max(1),
                deficit: 0,
                entries: VecDeque::new(),
            }
        });
        queue.entries.push_back(id);
        self.len += 1;
    }

    /// The entry [`Drr::pop`] would return, without serving it.
    pub(crate) fn peek(&self) -> Option<EntryId> {
        let tenant = self.active.front()?;
        self.tenants[tenant].entries.front().copied()
    }

    /// Serves the next entry: the front tenant's oldest.
    pub(crate) fn pop(&mut self) -> Option<EntryId> {
        let tenant = self.active.front()?;
        let queue = self
            .tenants
            .get_mut(tenant)
            .expect("active tenant has a queue");
        if queue.deficit == 0 {
            // A new turn: the quantum is the weight, in entries.
            queue.deficit = queue.weight;
        }
        let id = queue
            .entries
            .pop_front()
            .expect("active tenant has entries");
        queue.deficit -= 1;
        self.len -= 1;
        if queue.entries.is_empty() {
            // Nothing left to serve: forget the tenant and whatever credit
            // it had, so an idle tenant costs nothing and banks nothing.
            let tenant = self.active.pop_front().expect("front exists");
            self.tenants.remove(&tenant);
        } else if queue.deficit == 0 {
            self.active.rotate_left(1);
        }
        Some(id)
    }

    /// Takes `id` out of `tenant`'s line wherever it stands, charging the
    /// tenant nothing. Returns whether it was there.
    pub(crate) fn remove(&mut self, tenant: &str, id: EntryId) -> bool {
        let Some(queue) = self.tenants.get_mut(tenant) else {
            return false;
        };
        // Lines are bounded by the per-tenant depth limit, so a scan is cheap.
        let Some(at) = queue.entries.iter().position(|&e| e == id) else {
            return false;
        };
        queue.entries.remove(at);
        self.len -= 1;
        if queue.entries.is_empty() {
            self.tenants.remove(tenant);
            let at = self.active.iter().position(|t| &**t == tenant);
            self.active.remove(at.expect("queued tenant is active"));
        }
        true
    }

    /// Entries queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries queued by `tenant`.
    pub(crate) fn tenant_len(&self, tenant: &str) -> usize {
        self.tenants.get(tenant).map_or(0, |q| q.entries.len())
    }

    /// The tenants with entries queued.
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &Arc<str>> {
        self.active.iter()
    }

    /// The weight `tenant` is served with, if it has entries queued.
    #[cfg(test)]
    pub(crate) fn weight(&self, tenant: &str) -> Option<u32> {
        self.tenants.get(tenant).map(|q| q.weight)
    }

    /// Drains every entry, in no particular order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = EntryId> + '_ {
        self.active.clear();
        self.len = 0;
        self.tenants.drain().flat_map(|(_, q)| q.entries)
    }
}

#[cfg(test)]
mod tests;
