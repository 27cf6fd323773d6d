use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::*;

fn tenant(name: &str) -> Arc<str> {
    Arc::from(name)
}

/// Queues `n` entries for each `(tenant, weight)`, ids `tenant_index * 1000 + k`.
fn backlogged(weights: &[u32], n: u64) -> (Drr, Vec<Arc<str>>) {
    let mut drr = Drr::default();
    let names: Vec<_> = (0..weights.len())
        .map(|i| tenant(&format!("t{i}")))
        .collect();
    for k in 0..n {
        for (i, (name, &w)) in names.iter().zip(weights).enumerate() {
            drr.push(name, w, i as u64 * 1000 + k);
        }
    }
    (drr, names)
}

#[test]
fn weights_set_the_share_per_round() {
    let (mut drr, _) = backlogged(&[1, 3], 100);
    let order: Vec<_> = (0..8).map(|_| drr.pop().unwrap() / 1000).collect();
    assert_eq!(order, [0, 1, 1, 1, 0, 1, 1, 1]);
}

#[test]
fn each_tenant_is_fifo() {
    let (mut drr, _) = backlogged(&[2, 2], 3);
    let order: Vec<_> = std::iter::from_fn(|| drr.pop()).collect();
    assert_eq!(order, [0, 1, 1000, 1001, 2, 1002]);
}

#[test]
fn an_emptied_tenant_is_forgotten_and_rejoins_at_the_back() {
    let a = tenant("a");
    let b = tenant("b");
    let mut drr = Drr::default();
    drr.push(&a, 1, 1);
    drr.push(&b, 1, 2);
    assert_eq!(drr.pop(), Some(1));
    assert_eq!(drr.tenant_len("a"), 0);
    assert_eq!(drr.weight("a"), None);
    drr.push(&a, 1, 3);
    assert_eq!(drr.pop(), Some(2));
    assert_eq!(drr.pop(), Some(3));
    assert!(drr.is_empty());
    assert_eq!(drr.tenants().count(), 0);
}

#[test]
fn removing_charges_nothing() {
    let a = tenant("a");
    let b = tenant("b");
    let mut drr = Drr::default();
    for id in 0..3 {
        drr.push(&a, 2, id);
    }
    drr.push(&b, 1, 10);
    assert_eq!(drr.pop(), Some(0));
    // `a` is mid-turn with one dispatch left; removing its next entry leaves
    // that dispatch to the entry behind it.
    assert!(drr.remove("a", 1));
    assert!(!drr.remove("a", 1));
    assert_eq!(drr.peek(), Some(2));
    assert_eq!(drr.pop(), Some(2));
    assert_eq!(drr.pop(), Some(10));
    assert!(drr.is_empty());
}

#[test]
fn removing_a_tenants_last_entry_drops_its_turn() {
    let a = tenant("a");
    let b = tenant("b");
    let mut drr = Drr::default();
    drr.push(&a, 1, 1);
    drr.push(&b, 1, 2);
    assert!(drr.remove("a", 1));
    assert_eq!(drr.tenants().collect::<Vec<_>>(), [&b]);
    assert_eq!(drr.pop(), Some(2));
    assert!(drr.tenants.is_empty());
}

proptest! {
    /// While every tenant stays backlogged, after `n` dispatches each tenant's
    /// count is within its own weight of `n · w / Σw`.
    #[test]
    fn backlogged_shares_stay_within_one_quantum(
        weights in prop::collection::vec(1u32..=8, 1..=6),
        n in 1usize..=300,
    ) {
        let (mut drr, _) = backlogged(&weights, 400);
        let mut served = vec![0u64; weights.len()];
        for _ in 0..n {
            served[(drr.pop().unwrap() / 1000) as usize] += 1;
        }
        let total: u32 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let ideal = n as f64 * f64::from(w) / f64::from(total);
            let off = (served[i] as f64 - ideal).abs();
            prop_assert!(off <= f64::from(w), "tenant {i} weight {w}: {} served, ideal {ideal:.2}", served[i]);
        }
    }

    /// Any mix of pushes, pops and removals loses nothing, serves each tenant
    /// in order and keeps no state for tenants with nothing queued.
    #[test]
    fn operations_match_a_model(ops in prop::collection::vec((0u8..3, 0usize..4, 1u32..=3), 1..200)) {
        let names: Vec<_> = (0..4).map(|i| tenant(&format!("t{i}"))).collect();
        let mut drr = Drr::default();
        let mut model: BTreeMap<usize, VecDeque<EntryId>> = BTreeMap::new();
        let mut next = 0;
        for (op, t, w) in ops {
            match op {
                0 => {
                    drr.push(&names[t], w, next);
                    model.entry(t).or_default().push_back(next);
                    next += 1;
                }
                1 => {
                    let peeked = drr.peek();
                    let popped = drr.pop();
                    prop_assert_eq!(peeked, popped);
                    if let Some(id) = popped {
                        let owner = model.iter().find(|(_, q)| q.contains(&id)).map(|(&t, _)| t);
                        let owner = owner.expect("popped id was queued");
                        prop_assert_eq!(model.get_mut(&owner).unwrap().pop_front(), Some(id), "fifo per tenant");
                    } else {
                        prop_assert!(model.values().all(VecDeque::is_empty));
                    }
                }
                _ => {
                    let victim = model.get(&t).and_then(|q| q.get(w as usize % q.len().max(1))).copied();
                    if let Some(id) = victim {
                        prop_assert!(drr.remove(&names[t], id));
                        model.get_mut(&t).unwrap().retain(|&e| e != id);
                    }
                }
            }
            model.retain(|_, q| !q.is_empty());
            prop_assert_eq!(drr.len(), model.values().map(VecDeque::len).sum::<usize>());
            prop_assert_eq!(drr.tenants.len(), model.len());
            prop_assert_eq!(drr.active.len(), model.len());
            for (&t, q) in &model {
                prop_assert_eq!(drr.tenant_len(&names[t]), q.len());
            }
        }
    }
}
