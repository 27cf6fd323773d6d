//! The shared state's plumbing: the batch queue, specs, listeners, and
//! lease renewal.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use sluice_limit::{CapacityChange, Error, Limit};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{Inner, MAP_BOUND, lock};
use crate::batch::{Kind, Op, Reply, Spec};
use crate::bus::CapacityUpdate;
use crate::conn::Unavailable;

impl Inner {
    pub(crate) fn held_leases(&self) -> MutexGuard<'_, HashMap<String, Arc<Spec>>> {
        lock(&self.held)
    }

    /// Queues an operation that needs no answer. A full queue drops it:
    /// settles are then lost and releases wait for the lease to expire.
    pub(crate) fn send(self: &Arc<Self>, op: Op) {
        if self.lane().try_send(op).is_err() {
            self.dropped_ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs one operation in the next batch.
    pub(crate) async fn request(self: &Arc<Self>, kind: Kind) -> Result<Reply, Unavailable> {
        if self.conn.is_degraded() {
            return Err(Unavailable);
        }
        let (tx, rx) = oneshot::channel();
        self.lane()
            .send(Op {
                kind,
                reply: Some(tx),
            })
            .await
            .map_err(|_| Unavailable)?;
        rx.await.unwrap_or(Err(Unavailable))
    }

    pub(crate) fn spec(&self, resource: &str) -> Result<Arc<Spec>, Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let mut specs = lock(&self.specs);
        if let Some(s) = specs.get(resource) {
            return Ok(s.clone());
        }
        let set = lock(&self.overrides).get(resource).copied();
        let limit = set
            .or_else(|| self.rules.resolve(resource))
            .ok_or_else(|| Error::UnknownResource(resource.to_owned()))?;
        if specs.len() >= MAP_BOUND {
            specs.clear();
        }
        let s = Arc::new(Spec::new(resource.to_owned(), limit, self.header.margin_us));
        specs.insert(resource.to_owned(), s.clone());
        Ok(s)
    }

    /// A guessed limit ([`Limit::provisional`], the embedded defaults') is
    /// no ceiling in Redis either: once the upstream's rate-limit headers
    /// announce more than the guess, which this replica's local share
    /// follows, the shared state is kept at the local share's rate in
    /// force; back at the guess when that falls to it. A limit set at run
    /// time or configured by the user is left alone.
    pub(crate) fn follow_announced(self: &Arc<Self>, resource: &str) {
        let Some(guess) = self.rules.resolve(resource) else {
            return;
        };
        if !guess.is_provisional() || lock(&self.overrides).contains_key(resource) {
            return;
        }
        let Ok(cap) = self.local.get_capacity(resource) else {
            return;
        };
        let limit = if cap.announced_per_second.is_some()
            && cap.per_second() > guess.per_second_rate() * 1.000_001
        {
            Limit::new(cap.total, cap.window)
                .burst(cap.burst)
                .algorithm(guess.kind())
                .provisional(true)
        } else {
            guess
        };
        if limit.validate().is_err() {
            return;
        }
        let changed = {
            let mut specs = lock(&self.specs);
            match specs.get(resource) {
                Some(s) if s.limit == limit => false,
                _ => {
                    if specs.len() >= MAP_BOUND {
                        specs.clear();
                    }
                    let name = resource.to_owned();
                    let margin = specs.get(resource).map_or(self.header.margin_us, |s| {
                        s.margin_us.load(Ordering::Relaxed)
                    });
                    specs.insert(name.clone(), Arc::new(Spec::new(name, limit, margin)));
                    true
                }
            }
        };
        if changed {
            self.forget(resource);
        }
    }

    /// Keeps the margin the shared scripts hold back on `resource` at what
    /// this replica's own limiter holds: widened after a timing collision
    /// (the 429 it just heard), narrowed again after a quiet minute. Read
    /// from the local limiter only after a 429 or while widened, so a
    /// clean answer costs an atomic load until some collision has widened
    /// a margin.
    pub(crate) fn sync_margin(&self, resource: &str, throttled: bool) {
        if !throttled && !self.margins_widened.load(Ordering::Relaxed) {
            return;
        }
        let Ok(spec) = self.spec(resource) else {
            return;
        };
        let held = spec.margin_us.load(Ordering::Relaxed);
        if !throttled && held <= self.header.margin_us {
            return;
        }
        let Ok(cap) = self.local.get_capacity(resource) else {
            return;
        };
        let local = u64::try_from(cap.jitter_margin.as_micros()).unwrap_or(u64::MAX);
        if local > self.header.margin_us {
            self.margins_widened.store(true, Ordering::Relaxed);
        }
        spec.margin_us
            .store(local.max(self.header.margin_us), Ordering::Relaxed);
    }

    /// Forgets what this replica believed about `resource` (deny cache,
    /// leased block, a line's reserved tokens) after its capacity changed.
    pub(crate) fn forget(self: &Arc<Self>, resource: &str) {
        self.blocks.drop_block(self, resource);
        let line = lock(&self.queues).get(resource).cloned();
        if let Some(q) = line {
            self.drop_line(&q);
        }
        self.wake(resource);
    }

    pub(crate) fn changed(&self, change: &CapacityChange) {
        let ls = lock(&self.listeners).clone();
        for l in ls {
            l(change);
        }
    }

    pub(crate) fn updated(&self, update: &CapacityUpdate) {
        let ls = lock(&self.update_listeners).clone();
        for l in ls {
            l(update);
        }
    }

    pub(crate) fn member(&self, spec: &Spec, cost: u64) -> String {
        if spec.algo() <= 2 {
            return String::new();
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{n}:{cost}", self.cfg.replica_id)
    }
}

/// Renews this replica's in-flight leases every third of their TTL, so a
/// live grant never loses its slot and a dead replica's slots expire.
pub(super) fn spawn_renewal(weak: std::sync::Weak<Inner>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let every = match weak.upgrade() {
            Some(i) => i.cfg.lease_ttl / 3,
            None => return,
        };
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let held: Vec<(String, Arc<Spec>)> = inner
                .held_leases()
                .iter()
                .map(|(m, s)| (m.clone(), s.clone()))
                .collect();
            for (member, spec) in held {
                inner.send(Op {
                    kind: Kind::Renew { spec, member },
                    reply: None,
                });
            }
        }
    })
}
