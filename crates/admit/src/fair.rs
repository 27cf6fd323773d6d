//! One class's fair queue in one lane: a FIFO line per tenant, served by
//! the tenants' tags (see [`Service`]).
//!
//! Each dispatch goes to the tenant with the smallest tag among those with
//! entries here; among equal tags, the one whose turn came longest ago. A
//! tenant whose line empties is dropped, so idle tenants cost no memory
//! here.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::service::Service;

/// An entry's identity in the queue.
pub(crate) type EntryId = u64;

/// One class's fair queue.
#[derive(Debug, Default)]
pub(crate) struct FairQueue {
    /// Tenants with entries, in turn order: ties go to the front.
    active: VecDeque<Arc<str>>,
    lines: HashMap<Arc<str>, VecDeque<EntryId>, RandomState>,
    len: usize,
}

impl FairQueue {
    /// Queues `id` at the back of `tenant`'s line. A tenant new to the queue
    /// takes its turn after those already waiting.
    pub(crate) fn push(&mut self, tenant: &Arc<str>, id: EntryId) {
        self.lines
            .entry(Arc::clone(tenant))
            .or_insert_with(|| {
                self.active.push_back(Arc::clone(tenant));
                VecDeque::new()
            })
            .push_back(id);
        self.len += 1;
    }

    /// Where in `active` the next tenant to serve stands.
    fn next(&self, service: &Service) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, t) in self.active.iter().enumerate() {
            let tag = service.tag(t);
            if best.is_none_or(|(_, b)| tag < b) {
                best = Some((i, tag));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The entry [`FairQueue::pop`] would return, and its tenant.
    pub(crate) fn peek(&self, service: &Service) -> Option<(EntryId, &Arc<str>)> {
        let tenant = &self.active[self.next(service)?];
        Some((*self.lines[tenant].front()?, tenant))
    }

    /// Serves the next entry: the oldest of the tenant with the smallest
    /// tag, which then goes to the back of the turn order.
    pub(crate) fn pop(&mut self, service: &Service) -> Option<EntryId> {
        let at = self.next(service)?;
        let tenant = self.active.remove(at).expect("chosen tenant is active");
        let line = self
            .lines
            .get_mut(&tenant)
            .expect("active tenant has a line");
        let id = line.pop_front().expect("active tenant has entries");
        self.len -= 1;
        if line.is_empty() {
            // Nothing left to serve: forget the tenant here.
            self.lines.remove(&tenant);
        } else {
            self.active.push_back(tenant);
        }
        Some(id)
    }

    /// Takes `id` out of `tenant`'s line wherever it stands. Returns
    /// whether it was there.
    pub(crate) fn remove(&mut self, tenant: &str, id: EntryId) -> bool {
        let Some(line) = self.lines.get_mut(tenant) else {
            return false;
        };
        // Lines are bounded by the per-tenant depth limit, so a scan is cheap.
        let Some(at) = line.iter().position(|&e| e == id) else {
            return false;
        };
        line.remove(at);
        self.len -= 1;
        if line.is_empty() {
            self.lines.remove(tenant);
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
    #[cfg(test)]
    pub(crate) fn tenant_len(&self, tenant: &str) -> usize {
        self.lines.get(tenant).map_or(0, VecDeque::len)
    }

    /// The tenants with entries queued.
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &Arc<str>> {
        self.active.iter()
    }

    /// Drains every entry, in no particular order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = EntryId> + '_ {
        self.active.clear();
        self.len = 0;
        self.lines.drain().flat_map(|(_, q)| q)
    }
}

#[cfg(test)]
mod tests;
