//! Depth limits, the retry-after hint and the busy signal.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sluice_admit::{Admission, AdmissionQueue, Error, Priority, QueueConfig, Scope, Weights};
use support::{config, hold, poll_once, ticket, weight};

type Pending = Pin<Box<dyn Future<Output = Result<Admission<()>, Error>>>>;

/// Queues a ticket for `tenant` and checks it waits.
fn queue_one(queue: &AdmissionQueue, tenant: &str) -> Pending {
    let mut admit: Pending = Box::pin({
        let queue = queue.clone();
        let ticket = ticket(tenant, Priority::Normal);
        async move { queue.admit(ticket).await }
    });
    assert!(poll_once(admit.as_mut()).is_pending(), "{tenant} waits");
    admit
}

/// Admits a ticket that must be refused.
async fn refused(queue: &AdmissionQueue, tenant: &str) -> (Scope, Duration) {
    match queue.admit(ticket(tenant, Priority::Normal)).await {
        Err(Error::QueueFull { scope, retry_after }) => (scope, retry_after),
        other => panic!("{tenant}: expected queue full, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(start_paused = true)]
async fn seed_limits_refuse_the_51st_of_a_tenant_and_the_201st_in_all() {
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig::default());
    let _running: Vec<_> = hold_n(&queue, 10).await;
    let mut waiting: Vec<_> = (0..50).map(|_| queue_one(&queue, "acme")).collect();
    assert_eq!(queue.tenant_depth("acme"), 50);
    assert_eq!(refused(&queue, "acme").await.0, Scope::Tenant);

    for tenant in ["b", "c", "d"] {
        waiting.extend((0..50).map(|_| queue_one(&queue, tenant)));
    }
    assert_eq!(queue.stats().queued(), 200);
    assert_eq!(refused(&queue, "e").await.0, Scope::Total);
    assert_eq!(queue.stats().rejected, 2);
    // Refused tickets leave nothing behind.
    assert_eq!(queue.tenant_depth("e"), 0);
    assert_eq!(queue.stats().queued_tenants, 4);
}

async fn hold_n(queue: &AdmissionQueue, n: usize) -> Vec<sluice_admit::Permit<()>> {
    let mut permits = Vec::new();
    for _ in 0..n {
        permits.push(hold(queue, "running").await);
    }
    permits
}

#[tokio::test(start_paused = true)]
async fn a_freed_place_can_be_taken_again() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 2, 10));
    let blocker = hold(&queue, "x").await;
    let first = queue_one(&queue, "a");
    let _second = queue_one(&queue, "a");
    refused(&queue, "a").await;
    drop(first);
    let _third = queue_one(&queue, "a");
    drop(blocker);
}

#[tokio::test(start_paused = true)]
async fn retry_after_follows_the_dispatch_rate() {
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig {
        weights: Weights::default().with("heavy", weight(3)),
        ..config(1, 5, 20)
    });
    // Ten dispatches a second for ten seconds.
    for _ in 0..100 {
        drop(hold(&queue, "x").await);
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    let blocker = hold(&queue, "x").await;
    let mut waiting: Vec<_> = (0..5).map(|_| queue_one(&queue, "light")).collect();
    waiting.extend((0..5).map(|_| queue_one(&queue, "heavy")));

    // `light` (weight 1 of 4) drains its 5 at a quarter of ~10/s: ~2 s.
    let (scope, retry_after) = refused(&queue, "light").await;
    assert_eq!(scope, Scope::Tenant);
    assert!(
        (1.9..=2.1).contains(&retry_after.as_secs_f64()),
        "{retry_after:?}"
    );

    waiting.extend((0..10).map(|i| queue_one(&queue, &format!("t{i}"))));
    // 20 queued at ~10/s: ~2 s.
    let (scope, retry_after) = refused(&queue, "new").await;
    assert_eq!(scope, Scope::Total);
    assert!(
        (1.9..=2.1).contains(&retry_after.as_secs_f64()),
        "{retry_after:?}"
    );

    // With nothing dispatched for a whole window, the hint is the longest.
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(refused(&queue, "new").await.1, Duration::from_secs(60));
    drop(blocker);
}

#[tokio::test(start_paused = true)]
async fn busy_when_backlog_exceeds_twice_the_concurrency() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(2, 50, 50));
    let mut signal = queue.busy_signal();
    let running = hold_n(&queue, 2).await;
    let mut waiting: Vec<_> = (0..4)
        .map(|i| queue_one(&queue, &format!("t{i}")))
        .collect();
    assert!(!queue.is_busy(), "a backlog of 4 is not more than 2 × 2");
    assert!(!signal.has_changed().unwrap());

    waiting.push(queue_one(&queue, "t4"));
    assert!(queue.is_busy());
    assert!(queue.stats().busy);
    assert!(signal.has_changed().unwrap());
    assert!(*signal.borrow_and_update());

    // A caller giving up brings the backlog back to 4.
    waiting.pop();
    assert!(!queue.is_busy());
    assert!(signal.has_changed().unwrap());
    assert!(!*signal.borrow_and_update());

    // Running work does not count: only the backlog does.
    drop(running);
    assert_eq!(queue.stats().in_flight, 2);
    assert_eq!(queue.stats().queued(), 2);
    assert!(!queue.is_busy());
}
