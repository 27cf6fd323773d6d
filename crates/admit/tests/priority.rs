//! Strict priority between classes, with the starvation guard.

mod support;

use std::pin::pin;
use std::task::Poll;

use sluice_admit::{Admission, AdmissionQueue, Priority, QueueConfig, Ticket};
use support::{config, dispatch_order, hold, poll_once, ticket, weight};

#[tokio::test(start_paused = true)]
async fn high_goes_before_normal_before_low() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let blocker = hold(&queue, "t").await;

    let mut low = pin!(queue.admit(ticket("t", Priority::Low)));
    let mut normal = pin!(queue.admit(ticket("t", Priority::Normal)));
    let mut high = pin!(queue.admit(ticket("t", Priority::High)));
    assert!(poll_once(low.as_mut()).is_pending());
    assert!(poll_once(normal.as_mut()).is_pending());
    assert!(poll_once(high.as_mut()).is_pending());
    assert_eq!(queue.stats().queued_by_priority, [1, 1, 1]);

    drop(blocker);
    assert!(poll_once(low.as_mut()).is_pending());
    assert!(poll_once(normal.as_mut()).is_pending());
    let Poll::Ready(Ok(Admission::Run(permit))) = poll_once(high.as_mut()) else {
        panic!("high runs first");
    };
    assert_eq!(permit.priority(), Priority::High);

    drop(permit);
    assert!(poll_once(low.as_mut()).is_pending());
    let Poll::Ready(Ok(Admission::Run(permit))) = poll_once(normal.as_mut()) else {
        panic!("normal runs second");
    };
    drop(permit);
    assert!(matches!(
        poll_once(low.as_mut()),
        Poll::Ready(Ok(Admission::Run(_)))
    ));
}

#[tokio::test(start_paused = true)]
async fn earlier_arrivals_go_first_within_a_class() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let tickets = ["first", "second", "third"].map(|label| (ticket("t", Priority::Low), label));
    assert_eq!(
        dispatch_order(&queue, tickets).await,
        ["first", "second", "third"]
    );
}

/// `low` Low tickets, then `high` High tickets.
fn low_then_high(low: usize, high: usize) -> Vec<(Ticket, &'static str)> {
    let low = (0..low).map(|_| (ticket("bg", Priority::Low), "low"));
    let high = (0..high).map(|_| (ticket("chat", Priority::High), "high"));
    low.chain(high).collect()
}

#[tokio::test(start_paused = true)]
async fn low_is_not_starved_under_a_high_flood() {
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig {
        starvation_guard: Some(weight(9)),
        ..config(1, 100, 100)
    });
    let order = dispatch_order(&queue, low_then_high(3, 40)).await;
    let low_at: Vec<_> = (0..order.len()).filter(|&i| order[i] == "low").collect();
    // Passed over nine times, then served: one dispatch in ten.
    assert_eq!(low_at, [9, 19, 29]);
}

#[tokio::test(start_paused = true)]
async fn without_the_guard_priority_is_strict() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 100, 100));
    let order = dispatch_order(&queue, low_then_high(1, 30)).await;
    assert_eq!(order.last(), Some(&"low"));
}
