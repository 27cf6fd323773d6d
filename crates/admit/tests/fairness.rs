//! Weighted fair queuing between tenants inside a class.

mod support;

use sluice_admit::{AdmissionQueue, Priority, QueueConfig, Weights};
use support::{config, dispatch_order, ticket, weight};

/// Queues `per_tenant` entries for tenant `a`, then as many for `b`, and
/// returns who ran in what order, one at a time.
async fn order_of_a_then_b(weights: Weights, per_tenant: usize) -> Vec<&'static str> {
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig {
        weights,
        ..config(1, 100, 200)
    });
    // All of `a` arrives before any of `b`: arrival order must not matter.
    let tickets = ["a", "b"]
        .into_iter()
        .flat_map(|t| (0..per_tenant).map(move |_| (ticket(t, Priority::Normal), t)));
    let order = dispatch_order(&queue, tickets).await;
    assert_eq!(
        queue.stats().queued_tenants,
        0,
        "idle tenants leave no state"
    );
    order
}

/// Checks every prefix during which both tenants stayed backlogged: `a`'s
/// count is within its weight of its ideal share.
fn assert_shares(order: &[&str], weight_a: u32, weight_b: u32, backlogged: usize) {
    let share_a = f64::from(weight_a) / f64::from(weight_a + weight_b);
    let mut a = 0;
    for (n, tenant) in order.iter().take(backlogged).enumerate() {
        a += usize::from(*tenant == "a");
        let ideal = (n + 1) as f64 * share_a;
        let tolerance = f64::from(weight_a.max(weight_b));
        assert!(
            (a as f64 - ideal).abs() <= tolerance,
            "after {} dispatches a had {a}, ideal {ideal:.1}",
            n + 1
        );
    }
}

#[tokio::test(start_paused = true)]
async fn equal_weights_split_dispatches_evenly() {
    let order = order_of_a_then_b(Weights::default(), 40).await;
    assert_shares(&order, 1, 1, 80);
    let first_40_a = order[..40].iter().filter(|t| **t == "a").count();
    assert_eq!(first_40_a, 20);
}

#[tokio::test(start_paused = true)]
async fn weights_one_to_three_split_one_to_three() {
    let weights = Weights::default().with("a", weight(1)).with("b", weight(3));
    let order = order_of_a_then_b(weights, 40).await;
    // `b` has 40 queued and takes 3 of every 4: both stay backlogged for the
    // first 52 dispatches (13 rounds).
    assert_shares(&order, 1, 3, 52);
    let first_40_a = order[..40].iter().filter(|t| **t == "a").count();
    assert_eq!(first_40_a, 10);
    // Round 14 serves `a` once and `b` its last; then `a` runs alone.
    assert_eq!(order[52..54], ["a", "b"]);
    assert!(order[54..].iter().all(|t| *t == "a"));
}

#[tokio::test(start_paused = true)]
async fn a_tenant_cannot_take_more_than_its_share_by_arriving_first() {
    let order = order_of_a_then_b(Weights::default(), 5).await;
    assert_eq!(order, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn a_tickets_own_weight_wins_over_its_tenants() {
    // `b` weighs 1 in the config, but its tickets say 3 (an API key's
    // weight, set at run time): it takes 3 of every 4.
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 100, 200));
    let tickets = ["a", "b"].into_iter().flat_map(|t| {
        (0..40).map(move |_| {
            let tk = ticket(t, Priority::Normal);
            let tk = if t == "b" {
                tk.with_weight(weight(3))
            } else {
                tk
            };
            (tk, t)
        })
    });
    let order = dispatch_order(&queue, tickets).await;
    assert_shares(&order, 1, 3, 52);
    let first_40_a = order[..40].iter().filter(|t| **t == "a").count();
    assert_eq!(first_40_a, 10);
}
