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

use std::collections::HashMap;
use std::sync::Arc;

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
    accounts: HashMap<Arc<str>, Account>,
    /// Tenants with entries waiting.
    waiting_tenants: usize,
}

impl Service {
    /// The smallest tag among the tenants waiting, if any.
    fn virtual_time(&self) -> Option<f64> {
        self.accounts
            .values()
            .filter(|a| a.waiting > 0)
            .map(|a| a.tag)
            .min_by(f64::total_cmp)
    }

    /// An entry of `tenant` starts waiting.
    pub(crate) fn join(&mut self, tenant: &Arc<str>) {
        let vt = self.virtual_time();
        if self.accounts.get(tenant).is_none_or(|a| a.waiting == 0) {
            self.waiting_tenants += 1;
            // Idle accounts the clock has caught up with carry nothing.
            if let Some(vt) = vt {
                self.accounts.retain(|_, a| a.waiting > 0 || a.tag > vt);
            } else {
                self.accounts.clear();
            }
        }
        let a = self.accounts.entry(Arc::clone(tenant)).or_insert(Account {
            waiting: 0,
            tag: 0.0,
        });
        if a.waiting == 0 {
            a.tag = a.tag.max(vt.unwrap_or(0.0));
        }
        a.waiting += 1;
    }

    /// An entry of `tenant` stops waiting without being served (it expired,
    /// its caller left, the queue closed).
    pub(crate) fn leave(&mut self, tenant: &str) {
        self.settle(tenant, 0.0);
    }

    /// An entry of `tenant` (of `weight`) was dispatched.
    pub(crate) fn served(&mut self, tenant: &str, weight: u32) {
        self.settle(tenant, 1.0 / f64::from(weight.max(1)));
    }

    fn settle(&mut self, tenant: &str, charge: f64) {
        let Some(a) = self.accounts.get_mut(tenant) else {
            debug_assert!(false, "{tenant} has an account while waiting");
            return;
        };
        a.tag += charge;
        a.waiting -= 1;
        if a.waiting == 0 {
            self.waiting_tenants -= 1;
            if self.waiting_tenants == 0 {
                self.accounts.clear();
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

    #[test]
    fn newcomers_start_at_the_virtual_time() {
        let mut s = Service::default();
        let (a, b) = (t("a"), t("b"));
        s.join(&a);
        s.join(&a);
        s.served("a", 1);
        s.served("a", 1);
        // `a` left with a tag of 2 and nobody waits: history is forgotten.
        assert_eq!(s.accounts(), 0);
        s.join(&a);
        s.join(&a);
        s.served("a", 1);
        assert_eq!(s.tag("a"), 1.0);
        s.join(&b);
        // `b` starts level with `a`, not at zero.
        assert_eq!(s.tag("b"), s.tag("a"));
        assert_eq!(s.waiting_tenants(), 2);
        assert_eq!((s.waiting("a"), s.waiting("b")), (1, 1));
    }

    #[test]
    fn a_tenant_ahead_keeps_its_lead_while_idle() {
        let mut s = Service::default();
        let (a, b) = (t("a"), t("b"));
        s.join(&b);
        for _ in 0..3 {
            s.join(&a);
            s.served("a", 1);
        }
        // `a` is idle at 3, `b` waits at 0: `a` comes back at 3, not at 0.
        s.join(&a);
        assert_eq!(s.tag("a"), 3.0);
        // Weights divide the charge.
        s.served("b", 4);
        assert_eq!(s.tag("b"), 0.25);
        s.leave("a");
        assert_eq!(s.waiting_tenants(), 0);
        assert_eq!(s.accounts(), 0);
    }
}
