use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;
use tokio::time::Instant;

use super::*;

fn tenant(name: &str) -> Arc<str> {
    Arc::from(name)
}

/// A fair queue and the service accounts it is served by, kept in step as
/// the admission queue keeps them.
struct Harness {
    fair: FairQueue,
    service: Service,
    weights: Vec<u32>,
    names: Vec<Arc<str>>,
}

impl Harness {
    fn new(weights: &[u32]) -> Self {
        Harness {
            fair: FairQueue::default(),
            service: Service::default(),
            weights: weights.to_vec(),
            names: (0..weights.len())
                .map(|i| tenant(&format!("t{i}")))
                .collect(),
        }
    }

    /// Queues entry `k` of tenant `i` as id `i * 1000 + k`.
    fn push(&mut self, i: usize, k: u64) {
        self.fair.push(&self.names[i], i as u64 * 1000 + k);
        self.service.join(&self.names[i], Instant::now());
    }

    fn pop(&mut self) -> Option<EntryId> {
        let id = self.fair.pop(&self.service)?;
        let i = (id / 1000) as usize;
        self.service
            .served(&self.names[i], self.weights[i], Instant::now());
        Some(id)
    }

    fn backlogged(weights: &[u32], n: u64) -> Self {
        let mut h = Harness::new(weights);
        for k in 0..n {
            for i in 0..weights.len() {
                h.push(i, k);
            }
        }
        h
    }
}

#[test]
fn weights_set_the_shares() {
    let mut h = Harness::backlogged(&[1, 3], 100);
    let order: Vec<_> = (0..8).map(|_| h.pop().unwrap() / 1000).collect();
    assert_eq!(order.iter().filter(|&&t| t == 0).count(), 2, "{order:?}");
}

#[test]
fn each_tenant_is_fifo() {
    let mut h = Harness::new(&[1, 1]);
    h.push(0, 0);
    h.push(0, 1);
    h.push(1, 0);
    h.push(1, 1);
    h.push(0, 2);
    h.push(1, 2);
    let order: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
    assert_eq!(order, [0, 1000, 1, 1001, 2, 1002]);
}

#[test]
fn the_less_served_tenant_goes_first() {
    let mut h = Harness::new(&[1, 1]);
    // `t1` waits here from the start; `t0` waits in another lane too and
    // is served twice there.
    h.push(1, 0);
    let t0 = h.names[0].clone();
    h.service.join(&t0, Instant::now());
    for _ in 0..2 {
        h.service.join(&t0, Instant::now());
        h.service.served("t0", 1, Instant::now());
    }
    h.push(0, 0);
    h.push(1, 1);
    h.push(1, 2);
    let order: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
    // `t1` catches up first, then they take turns.
    assert_eq!(order, [1000, 1001, 0, 1002]);
}

#[test]
fn an_emptied_tenant_is_forgotten() {
    let mut h = Harness::new(&[1, 1]);
    h.push(0, 1);
    assert_eq!(h.pop(), Some(1));
    assert_eq!(h.fair.tenant_len("t0"), 0);
    assert!(h.fair.is_empty());
    assert_eq!(h.fair.tenants().count(), 0);
    assert!(h.fair.lines.is_empty());
}

#[test]
fn removing_a_tenants_last_entry_drops_its_turn() {
    let mut h = Harness::new(&[1, 1]);
    h.push(0, 1);
    h.push(1, 2);
    assert!(h.fair.remove("t0", 1));
    assert!(!h.fair.remove("t0", 1));
    assert_eq!(h.fair.tenants().collect::<Vec<_>>(), [&h.names[1]]);
    assert_eq!(h.fair.peek(&h.service).map(|(id, _)| id), Some(1002));
    assert_eq!(h.pop(), Some(1002));
    assert!(h.fair.lines.is_empty());
}

proptest! {
    /// While every tenant stays backlogged, after `n` dispatches each
    /// tenant's count is within its weight plus one of `n · w / Σw`.
    #[test]
    fn backlogged_shares_stay_within_one_quantum(
        weights in prop::collection::vec(1u32..=8, 1..=6),
        n in 1usize..=300,
    ) {
        let mut h = Harness::backlogged(&weights, 400);
        let mut served = vec![0u64; weights.len()];
        for _ in 0..n {
            served[(h.pop().unwrap() / 1000) as usize] += 1;
        }
        let total: u32 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let ideal = n as f64 * f64::from(w) / f64::from(total);
            let off = (served[i] as f64 - ideal).abs();
            prop_assert!(off <= f64::from(w) + 1.0, "tenant {i} weight {w}: {} served, ideal {ideal:.2}", served[i]);
        }
    }

    /// Any mix of pushes, pops and removals loses nothing, serves each tenant
    /// in order and keeps no state for tenants with nothing queued.
    #[test]
    fn operations_match_a_model(ops in prop::collection::vec((0u8..3, 0usize..4, 1u32..=3), 1..200)) {
        let mut h = Harness::new(&[1, 2, 3, 1]);
        let mut model: BTreeMap<usize, VecDeque<EntryId>> = BTreeMap::new();
        let mut next = 0;
        for (op, t, w) in ops {
            match op {
                0 => {
                    h.push(t, next);
                    model.entry(t).or_default().push_back(t as u64 * 1000 + next);
                    next += 1;
                }
                1 => {
                    let peeked = h.fair.peek(&h.service).map(|(id, _)| id);
                    let popped = h.pop();
                    prop_assert_eq!(peeked, popped);
                    if let Some(id) = popped {
                        let owner = (id / 1000) as usize;
                        prop_assert_eq!(model.get_mut(&owner).unwrap().pop_front(), Some(id), "fifo per tenant");
                    } else {
                        prop_assert!(model.values().all(VecDeque::is_empty));
                    }
                }
                _ => {
                    let victim = model.get(&t).and_then(|q| q.get(w as usize % q.len().max(1))).copied();
                    if let Some(id) = victim {
                        prop_assert!(h.fair.remove(&h.names[t].clone(), id));
                        h.service.leave(&h.names[t].clone(), Instant::now());
                        model.get_mut(&t).unwrap().retain(|&e| e != id);
                    }
                }
            }
            model.retain(|_, q| !q.is_empty());
            prop_assert_eq!(h.fair.len(), model.values().map(VecDeque::len).sum::<usize>());
            prop_assert_eq!(h.fair.lines.len(), model.len());
            prop_assert_eq!(h.fair.active.len(), model.len());
            for (&t, q) in &model {
                prop_assert_eq!(h.fair.tenant_len(&h.names[t]), q.len());
                prop_assert_eq!(h.service.waiting(&h.names[t]), q.len());
            }
            prop_assert_eq!(h.service.waiting_tenants(), model.len());
        }
    }
}
