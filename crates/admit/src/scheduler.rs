//! Strict priority between classes, a fair queue inside each, and the
//! starvation guard.
//!
//! The guard counts, for each lower class with entries queued, how many
//! dispatches in a row went to a higher class instead. Once that count
//! reaches the limit the class takes the next dispatch (the lowest such
//! class first), so no class with entries waits behind more than `limit`
//! higher-class dispatches in a row: under a flood of `High`, `Low` still
//! gets one dispatch in `limit + 1`. Counting dispatches rather than waiting
//! time keeps the guard independent of the clock and of how long calls take,
//! and leaves `High` the bulk of the slots (80% or more at the default
//! limit of 9 with all three classes backlogged). A class that empties
//! starts over from zero.

use std::sync::Arc;

use crate::Priority;
use crate::fair::{EntryId, FairQueue};
use crate::service::Service;

#[derive(Debug)]
pub(crate) struct Scheduler {
    classes: [FairQueue; 3],
    passed_over: [u32; 3],
    /// `None`: pure strict priority.
    guard: Option<u32>,
}

impl Scheduler {
    pub(crate) fn new(guard: Option<u32>) -> Self {
        Scheduler {
            classes: Default::default(),
            passed_over: [0; 3],
            guard,
        }
    }

    pub(crate) fn push(&mut self, priority: Priority, tenant: &Arc<str>, id: EntryId) {
        let class = priority.index();
        if self.classes[class].is_empty() {
            self.passed_over[class] = 0;
        }
        self.classes[class].push(tenant, id);
    }

    /// The class the next dispatch goes to.
    fn pick(&self) -> Option<usize> {
        if let Some(limit) = self.guard {
            // Lowest first: if both lower classes are starving, the one that
            // has been passed over by more traffic goes first.
            let starving = (1..3)
                .rev()
                .find(|&c| !self.classes[c].is_empty() && self.passed_over[c] >= limit);
            if starving.is_some() {
                return starving;
            }
        }
        (0..3).find(|&c| !self.classes[c].is_empty())
    }

    /// The entry [`Scheduler::pop`] would return, and its class.
    pub(crate) fn peek(&self, service: &Service) -> Option<(Priority, EntryId)> {
        let class = self.pick()?;
        let (id, _) = self.classes[class].peek(service)?;
        Some((Priority::ALL[class], id))
    }

    pub(crate) fn pop(&mut self, service: &Service) -> Option<EntryId> {
        let class = self.pick()?;
        let id = self.classes[class].pop(service);
        for lower in class + 1..3 {
            if !self.classes[lower].is_empty() {
                self.passed_over[lower] = self.passed_over[lower].saturating_add(1);
            }
        }
        self.passed_over[class] = 0;
        id
    }

    /// Takes `id` out of the queue without charging its tenant or class.
    pub(crate) fn remove(&mut self, priority: Priority, tenant: &str, id: EntryId) -> bool {
        self.classes[priority.index()].remove(tenant, id)
    }

    pub(crate) fn len(&self) -> usize {
        self.classes.iter().map(FairQueue::len).sum()
    }

    pub(crate) fn class_len(&self, priority: Priority) -> usize {
        self.classes[priority.index()].len()
    }

    #[cfg(test)]
    pub(crate) fn tenant_len(&self, tenant: &str) -> usize {
        self.classes.iter().map(|c| c.tenant_len(tenant)).sum()
    }

    /// Tenants with at least one entry queued, in any class (a tenant in
    /// several classes appears once per class).
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &Arc<str>> {
        self.classes.iter().flat_map(FairQueue::tenants)
    }

    /// Empties the queue, returning every entry.
    pub(crate) fn drain(&mut self) -> Vec<EntryId> {
        self.passed_over = [0; 3];
        self.classes.iter_mut().flat_map(FairQueue::drain).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No tenant has been served: every tag is level.
    static NONE: std::sync::LazyLock<Service> = std::sync::LazyLock::new(Service::default);

    fn fill(s: &mut Scheduler, priority: Priority, ids: std::ops::Range<EntryId>) {
        let t: Arc<str> = Arc::from("t");
        for id in ids {
            s.push(priority, &t, id);
        }
    }

    #[test]
    fn strict_priority_without_guard() {
        let mut s = Scheduler::new(None);
        fill(&mut s, Priority::Low, 0..3);
        fill(&mut s, Priority::Normal, 10..13);
        fill(&mut s, Priority::High, 20..23);
        let order: Vec<_> = std::iter::from_fn(|| s.pop(&NONE)).collect();
        assert_eq!(order, [20, 21, 22, 10, 11, 12, 0, 1, 2]);
    }

    #[test]
    fn guard_gives_a_starved_class_one_dispatch_in_limit_plus_one() {
        let mut s = Scheduler::new(Some(3));
        fill(&mut s, Priority::High, 0..100);
        fill(&mut s, Priority::Low, 100..110);
        let order: Vec<_> = (0..12).map(|_| s.pop(&NONE).unwrap() >= 100).collect();
        let low_at: Vec<_> = (0..12).filter(|&i| order[i]).collect();
        assert_eq!(low_at, [3, 7, 11]);
    }

    #[test]
    fn guard_serves_both_starved_classes() {
        for limit in [1, 2, 9] {
            let mut s = Scheduler::new(Some(limit));
            fill(&mut s, Priority::High, 0..1000);
            fill(&mut s, Priority::Normal, 1000..2000);
            fill(&mut s, Priority::Low, 2000..3000);
            let classes: Vec<_> = (0..600).map(|_| s.pop(&NONE).unwrap() / 1000).collect();
            for class in 1..3 {
                // Dispatches of a higher class in a row while this one waited.
                let mut run = 0;
                for &served in &classes {
                    if served < class {
                        run += 1;
                        assert!(
                            run <= limit,
                            "limit {limit}: class {class} passed over {run} times"
                        );
                    } else if served == class {
                        run = 0;
                    }
                }
            }
            if limit == 9 {
                let high = classes.iter().filter(|&&c| c == 0).count();
                assert!(high * 10 >= 600 * 8, "high keeps most dispatches: {high}");
            }
        }
    }

    #[test]
    fn a_class_that_empties_starts_over() {
        let mut s = Scheduler::new(Some(2));
        fill(&mut s, Priority::High, 0..100);
        fill(&mut s, Priority::Low, 100..101);
        s.pop(&NONE);
        assert!(s.remove(Priority::Low, "t", 100));
        fill(&mut s, Priority::Low, 101..102);
        // A fresh Low entry waits a full guard's worth again.
        assert!(s.pop(&NONE).unwrap() < 100);
        assert!(s.pop(&NONE).unwrap() < 100);
        assert_eq!(s.pop(&NONE), Some(101));
    }

    #[test]
    fn peek_agrees_with_pop() {
        let mut s = Scheduler::new(Some(1));
        fill(&mut s, Priority::High, 0..5);
        fill(&mut s, Priority::Low, 10..15);
        while let Some((_, id)) = s.peek(&NONE) {
            assert_eq!(s.pop(&NONE), Some(id));
        }
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn counts_tenants_across_classes() {
        let mut s = Scheduler::new(None);
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        s.push(Priority::High, &a, 1);
        s.push(Priority::Low, &a, 2);
        s.push(Priority::Low, &b, 3);
        let mut tenants: Vec<&str> = s.tenants().map(|t| &**t).collect();
        tenants.sort_unstable();
        assert_eq!(tenants, ["a", "a", "b"]);
        assert_eq!(s.tenant_len("a"), 2);
        assert_eq!(s.class_len(Priority::Low), 2);
        assert_eq!(s.drain().len(), 3);
        assert_eq!(s.tenants().count(), 0);
    }
}
