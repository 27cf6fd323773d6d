//! The service each tenant has received, across every lane and class: the
//! tags that fair queuing serves tenants by.
//!
//! Start-time fair queuing with one virtual clock for the whole queue: a
//! tenant's tag grows by `1 / weight` with every dispatch it gets, in any
//! lane, and each lane serves, among the tenants with entries in it, the
//! one with the smallest tag. Per-lane round robin alone is fair only
//! between tenants that are always waiting in that lane; agents spread
//! over many models come and go from each lane, and there a tenant with
//! more agents is present more often and takes more than its share. With
//! one clock, a tenant that was served less anywhere goes first wherever
//! it waits.
//!
//! A tenant that starts waiting again starts at the smallest tag among
//! those waiting (the virtual time), never below: idle time banks no
//! credit. A tenant that stops waiting keeps its account only while its
//! tag is ahead of the virtual time (it was served more than others and
//! must not start over from the bottom), so accounts are bounded by the
//! tenants that have waited since the queue last emptied.
//!
//! Except at the start of a busy period: tenants that arrive within
//! [`ARRIVAL_GRACE`] of the first one count as arriving together. A swarm
//! whose tenants start a few milliseconds apart would otherwise leave the
//! first one every free slot and burst token for good (it was served
//! while the others were still connecting, so by the rule above that
//! service is forgiven); instead, newcomers in the grace start at the
//! bottom and are served first until they have caught up. What a tenant
//! can get ahead this way is bounded by one grace of service.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;
use tokio::time::Instant;

/// How long after a busy period starts a newcomer still counts as having
/// arrived with the first tenant.
pub(crate) const ARRIVAL_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Account {
    /// Entries waiting, all lanes.
    waiting: usize,
    /// Dispatches received, each counting `1 / weight`.
    tag: f64,
}

/// Tags and waiting counts per tenant.
#[derive(Debug, Default)]
pub(crate) struct Service {
    accounts: HashMap<Arc<str>, Account, RandomState>,
    /// Tenants with entries waiting.
    waiting_tenants: usize,
    /// When the busy period of the accounts held began.
    epoch: Option<Instant>,
    /// See [`ARRIVAL_GRACE`]; zero (the default) keeps no grace.
    grace: Duration,
}

impl Service {
    /// Accounts whose newcomers count as arriving together for `grace`
    /// after a busy period starts.
    pub(crate) fn with_grace(grace: Duration) -> Self {
        Service {
            grace,
            ..Service::default()
        }
    }

    fn in_grace(&self, now: Instant) -> bool {
        self.epoch
            .is_some_and(|e| now.saturating_duration_since(e) < self.grace)
    }

    /// The smallest tag among the tenants waiting, if any.
    fn virtual_time(&self) -> Option<f64> {
        self.accounts
            .values()
            .filter(|a| a.waiting > 0)
            .map(|a| a.tag)
            .min_by(f64::total_cmp)
    }

    /// An entry of `tenant` starts waiting.
    pub(crate) fn join(&mut self, tenant: &Arc<str>, now: Instant) {
        let vt = self.virtual_time();
        if self.accounts.get(tenant).is_none_or(|a| a.waiting == 0) {
            self.waiting_tenants += 1;
            if !self.in_grace(now) {
                // Idle accounts the clock has caught up with carry nothing.
                if let Some(vt) = vt {
                    self.accounts.retain(|_, a| a.waiting > 0 || a.tag > vt);
                } else {
                    self.accounts.clear();
                    self.epoch = Some(now);
                }
            }
        }
        // In the grace a newcomer starts at the bottom, level with the
        // first tenant's start; after it, at the virtual time.
        let start = if self.in_grace(now) {
            0.0
        } else {
            vt.unwrap_or(0.0)
        };
        let a = self.accounts.entry(Arc::clone(tenant)).or_insert(Account {
            waiting: 0,
            tag: 0.0,
        });
        if a.waiting == 0 {
            a.tag = a.tag.max(start);
        }
        a.waiting += 1;
    }

    /// An entry of `tenant` stops waiting without being served (it expired,
    /// its caller left, the queue closed).
    pub(crate) fn leave(&mut self, tenant: &str, now: Instant) {
        self.settle(tenant, 0.0, now);
    }

    /// An entry of `tenant` (of `weight`) was dispatched.
    pub(crate) fn served(&mut self, tenant: &str, weight: u32, now: Instant) {
        self.settle(tenant, 1.0 / f64::from(weight.max(1)), now);
    }

    fn settle(&mut self, tenant: &str, charge: f64, now: Instant) {
        let Some(a) = self.accounts.get_mut(tenant) else {
            debug_assert!(false, "{tenant} has an account while waiting");
            return;
        };
        a.tag += charge;
        a.waiting -= 1;
        if a.waiting == 0 {
            self.waiting_tenants -= 1;
            // Nobody waits: history is forgotten, unless the busy period
            // is still in its grace (its newcomers have yet to come).
            if self.waiting_tenants == 0 && !self.in_grace(now) {
                self.accounts.clear();
                self.epoch = None;
            }
        }
    }

    /// `tenant`'s tag (0 for a tenant without an account).
    pub(crate) fn tag(&self, tenant: &str) -> f64 {
        self.accounts.get(tenant).map_or(0.0, |a| a.tag)
    }

    /// Entries `tenant` has waiting, all lanes.
    pub(crate) fn waiting(&self, tenant: &str) -> usize {
        self.accounts.get(tenant).map_or(0, |a| a.waiting)
    }

    /// Tenants with entries waiting.
    pub(crate) fn waiting_tenants(&self) -> usize {
        self.waiting_tenants
    }

    /// Accounts held (waiting tenants and idle ones still ahead).
    #[cfg(test)]
    pub(crate) fn accounts(&self) -> usize {
        self.accounts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    fn now() -> Instant {
        Instant::now()
    }

    #[test]
    fn newcomers_start_at_the_virtual_time() {
        let mut s = Service::default();
        let (a, b) = (t("a"), t("b"));
        s.join(&a, now());
        s.join(&a, now());
        s.served("a", 1, now());
        s.served("a", 1, now());
        // `a` left with a tag of 2 and nobody waits: history is forgotten.
        assert_eq!(s.accounts(), 0);
        s.join(&a, now());
        s.join(&a, now());
        s.served("a", 1, now());
        assert_eq!(s.tag("a"), 1.0);
        s.join(&b, now());
        // `b` starts level with `a`, not at zero.
        assert_eq!(s.tag("b"), s.tag("a"));
        assert_eq!(s.waiting_tenants(), 2);
        assert_eq!((s.waiting("a"), s.waiting("b")), (1, 1));
    }

    #[test]
    fn a_tenant_ahead_keeps_its_lead_while_idle() {
        let mut s = Service::default();
        let (a, b) = (t("a"), t("b"));
        s.join(&b, now());
        for _ in 0..3 {
            s.join(&a, now());
            s.served("a", 1, now());
        }
        // `a` is idle at 3, `b` waits at 0: `a` comes back at 3, not at 0.
        s.join(&a, now());
        assert_eq!(s.tag("a"), 3.0);
        // Weights divide the charge.
        s.served("b", 4, now());
        assert_eq!(s.tag("b"), 0.25);
        s.leave("a", now());
        assert_eq!(s.waiting_tenants(), 0);
        assert_eq!(s.accounts(), 0);
    }

    #[test]
    fn tenants_arriving_in_the_grace_start_level_with_the_first() {
        let mut s = Service::with_grace(ARRIVAL_GRACE);
        let (a, b, c) = (t("a"), t("b"), t("c"));
        let t0 = now();
        let ms = |n| t0 + Duration::from_millis(n);
        // `a` alone: every entry served at once, the queue empty between.
        for i in 0..10 {
            s.join(&a, ms(i));
            s.served("a", 1, ms(i));
        }
        assert_eq!(s.tag("a"), 10.0, "kept through the grace");
        s.join(&a, ms(20));
        // `b` arrives 30 ms after the start: level with where `a` started.
        s.join(&b, ms(30));
        assert_eq!((s.tag("a"), s.tag("b")), (10.0, 0.0));
        // After the grace a newcomer starts at the virtual time again.
        s.join(&c, ms(1_500));
        assert_eq!(s.tag("c"), 0.0, "the virtual time is b's tag");
        for _ in 0..4 {
            s.join(&b, ms(1_500));
            s.served("b", 1, ms(1_500));
        }
        s.served("c", 1, ms(1_600));
        s.leave("a", ms(1_600));
        s.served("b", 1, ms(1_600));
        // The queue emptied after the grace: history is forgotten, and
        // the next arrival starts a new busy period with a grace of its own.
        assert_eq!(s.accounts(), 0);
        s.join(&c, ms(5_000));
        s.served("c", 1, ms(5_000));
        assert_eq!(s.tag("c"), 1.0);
        s.join(&a, ms(5_100));
        assert_eq!(s.tag("a"), 0.0);
    }
}
