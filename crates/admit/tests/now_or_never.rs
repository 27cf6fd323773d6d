//! `try_admit`: a slot now or a refusal now, never a wait.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_admit::{Admission, AdmissionQueue, Error, Permit, Priority, Scope, Ticket};
use support::{config, hold, hold_ticket, settle, spawn_recorder, ticket};
use tokio::time::{Instant, sleep};

fn in_lane(tenant: &str, lane: &str) -> Ticket {
    ticket(tenant, Priority::Normal).with_lane(lane)
}

fn would_wait<T>(result: Result<Permit<T>, Error>) -> Duration {
    match result {
        Err(Error::WouldWait { retry_after }) => retry_after,
        other => panic!("expected WouldWait, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(start_paused = true)]
async fn a_free_slot_is_granted_however_late_the_ticket_arrives() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    // The deadline a caller that will not wait used to give itself.
    let ticket = Ticket::new("a", Instant::now() + Duration::from_millis(1)).with_lane("m");
    // Descheduled past it before reaching the queue.
    sleep(Duration::from_millis(50)).await;
    assert_eq!(
        queue.admit(ticket.clone()).await.map(|_| ()),
        Err(Error::DeadlineExceeded),
        "admit refuses a ticket whose deadline passed"
    );

    let permit = queue.try_admit(ticket).expect("an idle lane grants it");
    assert_eq!((permit.tenant(), permit.waited()), ("a", Duration::ZERO));
    let stats = queue.stats();
    assert_eq!(
        (stats.in_flight, stats.dispatched, stats.queued()),
        (1, 1, 0)
    );
    assert_eq!((stats.rejected, stats.expired), (0, 1));
    drop(permit);
    assert_eq!(queue.stats().in_flight, 0);
    assert!(queue.lanes().is_empty(), "the lane goes with its last slot");
}

#[tokio::test(start_paused = true)]
async fn a_full_lane_refuses_at_once_and_queues_nothing() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let held = hold_ticket(&queue, in_lane("x", "m")).await;

    let retry_after = would_wait(queue.try_admit(in_lane("a", "m")));
    assert!(retry_after >= Duration::from_secs(1), "{retry_after:?}");
    let stats = queue.stats();
    assert_eq!((stats.queued(), stats.in_flight), (0, 1));
    assert_eq!((stats.rejected, stats.dispatched), (1, 1));
    assert_eq!(queue.tenant_depth("a"), 0);

    // Lanes are apart: another one has room.
    let other = queue.try_admit(in_lane("a", "n")).expect("lane n is idle");
    // The slot back, lane m has room again.
    drop(held);
    let again = queue.try_admit(in_lane("a", "m")).expect("lane m is free");
    assert_eq!(queue.stats().in_flight, 2);
    drop((other, again));
}

#[tokio::test(start_paused = true)]
async fn entries_queued_ahead_keep_their_turn() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = hold(&queue, "x").await;
    let waiting = spawn_recorder(&queue, ticket("b", Priority::Low), "b", &log);
    settle().await;

    // A high-priority caller that will not wait does not pass it.
    would_wait(queue.try_admit(ticket("a", Priority::High)));
    drop(held);
    waiting.await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["b"]);
}

/// Queues two entries each for `a` and `b` (all of `a`'s first) behind a
/// held slot, calls `meanwhile` while they wait, and returns the order
/// they ran in.
async fn order_with(
    queue: &AdmissionQueue,
    meanwhile: impl FnOnce(&AdmissionQueue),
) -> Vec<&'static str> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = hold(queue, "x").await;
    let tasks: Vec<_> = ["a", "a", "b", "b"]
        .into_iter()
        .map(|t| spawn_recorder(queue, ticket(t, Priority::Normal), t, &log))
        .collect();
    settle().await;
    meanwhile(queue);
    drop(held);
    for task in tasks {
        task.await.unwrap();
    }
    log.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_refusal_charges_the_tenant_nothing() {
    let baseline = order_with(&AdmissionQueue::new(config(1, 10, 10)), |_| {}).await;
    let refused = AdmissionQueue::new(config(1, 10, 10));
    let order = order_with(&refused, |queue| {
        for _ in 0..5 {
            would_wait(queue.try_admit(ticket("a", Priority::Normal)));
        }
        assert_eq!(queue.tenant_depth("a"), 2);
    })
    .await;
    assert_eq!(order, baseline);
    assert_eq!(refused.stats().rejected, 5);
}

#[tokio::test(start_paused = true)]
async fn a_grant_charges_the_tenant_as_admit_does() {
    // `a` was served once, just before the others arrived: it goes after
    // `b` at the next tie.
    let admitted: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    drop(hold(&admitted, "a").await);
    let baseline = order_with(&admitted, |_| {}).await;
    assert_eq!(baseline, ["b", "a", "b", "a"]);

    let tried: AdmissionQueue = AdmissionQueue::new(config(1, 10, 10));
    drop(tried.try_admit(ticket("a", Priority::Normal)).unwrap());
    assert_eq!(order_with(&tried, |_| {}).await, baseline);
    assert_eq!(tried.stats(), admitted.stats());
}

#[tokio::test(start_paused = true)]
async fn depth_limits_and_closing_refuse_as_admit_does() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 1, 10));
    let _held = hold(&queue, "x").await;
    let mut queued = Box::pin(queue.admit(ticket("a", Priority::Normal)));
    assert!(support::poll_once(queued.as_mut()).is_pending());

    // `a` has its one place queued: refused in any lane, idle or not.
    let full = queue.try_admit(in_lane("a", "idle")).map(|_| ());
    assert!(
        matches!(
            full,
            Err(Error::QueueFull {
                scope: Scope::Tenant,
                ..
            })
        ),
        "{full:?}"
    );
    queue.close();
    assert_eq!(
        queue.try_admit(in_lane("b", "idle")).map(|_| ()),
        Err(Error::Closed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_in_flight_is_refused_not_joined() {
    let queue: AdmissionQueue<Arc<str>> = AdmissionQueue::new(config(4, 10, 10));
    let keyed = || ticket("acme", Priority::Normal).with_dedup_key("req-1");

    let leader = queue.try_admit(keyed()).expect("an idle lane grants it");
    assert!(leader.is_leader());
    // `admit` joins the flight a granted ticket leads...
    let joiner = tokio::spawn({
        let queue = queue.clone();
        async move { queue.admit(keyed()).await }
    });
    settle().await;
    // ...where a ticket that will not wait cannot: the result is not
    // there yet, and running it again would break "run once".
    would_wait(queue.try_admit(keyed()));
    // The same key from another tenant is another request.
    let other = queue
        .try_admit(ticket("other", Priority::Normal).with_dedup_key("req-1"))
        .expect("keys are scoped to their tenant");
    drop(other);

    leader.complete(Arc::from("answer"));
    match joiner.await.unwrap() {
        Ok(Admission::Joined(answer)) => assert_eq!(&*answer, "answer"),
        other => panic!("expected the leader's answer, got {:?}", other.map(|_| ())),
    }
    let stats = queue.stats();
    assert_eq!(
        (
            stats.dispatched,
            stats.deduplicated,
            stats.rejected,
            stats.flights
        ),
        (2, 1, 1, 0)
    );
    // The flight over, the key runs again.
    assert!(queue.try_admit(keyed()).unwrap().is_leader());
}
