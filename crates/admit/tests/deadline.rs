//! Deadlines, callers that give up, and closing.

mod support;

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use sluice_admit::{Admission, AdmissionQueue, Error, Priority, Ticket};
use support::{config, hold, poll_once, settle, spawn_recorder, ticket};
use tokio::time::{Instant, advance};

fn due_in(tenant: &str, secs: u64) -> Ticket {
    Ticket::new(tenant, Instant::now() + Duration::from_secs(secs))
}

#[tokio::test(start_paused = true)]
async fn an_entry_leaves_at_its_deadline_holding_nothing() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let blocker = hold(&queue, "x").await;
    let mut admit = pin!(queue.admit(due_in("a", 5)));
    assert!(poll_once(admit.as_mut()).is_pending());

    advance(Duration::from_millis(4_999)).await;
    assert!(poll_once(admit.as_mut()).is_pending());
    advance(Duration::from_millis(1)).await;
    assert!(matches!(
        poll_once(admit.as_mut()),
        Poll::Ready(Err(Error::DeadlineExceeded))
    ));

    let stats = queue.stats();
    assert_eq!((stats.queued(), stats.expired, stats.dispatched), (0, 1, 1));
    assert_eq!(queue.tenant_depth("a"), 0);
    drop(blocker);
    assert_eq!(queue.stats().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn the_timer_wakes_the_waiting_task() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let _blocker = hold(&queue, "x").await;
    let start = Instant::now();
    let result = queue.admit(due_in("a", 3)).await;
    assert_eq!(result.map(|_| ()), Err(Error::DeadlineExceeded));
    // Paused time jumps straight to the timer: nothing polled in between.
    assert_eq!(Instant::now() - start, Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn an_expired_entry_costs_its_tenant_no_turn() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let log = Arc::new(Mutex::new(Vec::new()));
    let blocker = hold(&queue, "x").await;
    let mut doomed = Box::pin(queue.admit(due_in("a", 1)));
    assert!(poll_once(doomed.as_mut()).is_pending());
    let a = spawn_recorder(&queue, ticket("a", Priority::Normal), "a", &log);
    let b = spawn_recorder(&queue, ticket("b", Priority::Normal), "b", &log);
    settle().await;

    // The deadline passes before the doomed entry's own task looks: dispatch
    // skips it instead of granting it, and `a` keeps its turn.
    advance(Duration::from_secs(2)).await;
    drop(blocker);
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["a", "b"]);
    assert!(matches!(
        poll_once(doomed.as_mut()),
        Poll::Ready(Err(Error::DeadlineExceeded))
    ));
    let stats = queue.stats();
    assert_eq!(
        (stats.expired, stats.dispatched, stats.in_flight),
        (1, 3, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_past_is_refused_at_once() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let late = Ticket::new("a", Instant::now());
    assert_eq!(
        queue.admit(late).await.map(|_| ()),
        Err(Error::DeadlineExceeded)
    );
    assert_eq!(queue.stats().dispatched, 0);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_future_leaves_the_queue() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let blocker = hold(&queue, "x").await;
    let mut admit = Box::pin(queue.admit(due_in("a", 60)));
    assert!(poll_once(admit.as_mut()).is_pending());
    assert_eq!(queue.tenant_depth("a"), 1);

    drop(admit);
    let stats = queue.stats();
    assert_eq!(
        (stats.queued(), stats.queued_tenants, stats.cancelled),
        (0, 0, 1)
    );
    drop(blocker);
    assert_eq!(queue.stats().in_flight, 0);
    assert_eq!(queue.stats().dispatched, 1);
}

#[tokio::test(start_paused = true)]
async fn a_future_dropped_after_its_grant_returns_the_slot() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let blocker = hold(&queue, "x").await;
    let mut granted = Box::pin(queue.admit(due_in("a", 60)));
    let mut next = pin!(queue.admit(due_in("b", 60)));
    assert!(poll_once(granted.as_mut()).is_pending());
    assert!(poll_once(next.as_mut()).is_pending());

    drop(blocker);
    // `granted` now holds the slot but its caller never comes back for it.
    assert_eq!(queue.stats().in_flight, 1);
    assert!(poll_once(next.as_mut()).is_pending());
    drop(granted);
    assert!(matches!(
        poll_once(next.as_mut()),
        Poll::Ready(Ok(Admission::Run(_)))
    ));
    assert_eq!(queue.stats().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn closing_sends_waiters_away_and_refuses_newcomers() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let running = hold(&queue, "x").await;
    let mut waiting = pin!(queue.admit(due_in("a", 60)));
    assert!(poll_once(waiting.as_mut()).is_pending());

    queue.close();
    assert!(matches!(
        poll_once(waiting.as_mut()),
        Poll::Ready(Err(Error::Closed))
    ));
    assert_eq!(
        queue.admit(due_in("b", 60)).await.map(|_| ()),
        Err(Error::Closed)
    );
    // Running work finishes normally.
    drop(running);
    assert_eq!(queue.stats().in_flight, 0);
    assert_eq!(queue.stats().queued(), 0);
}
