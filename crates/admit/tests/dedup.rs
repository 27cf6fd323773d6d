//! Single flight: identical requests run once and share the result.

mod support;

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use sluice_admit::{Admission, AdmissionQueue, Error, Priority, Ticket};
use support::{config, hold, poll_once, ticket};
use tokio::time::Instant;

type Queue = AdmissionQueue<Arc<str>>;

fn keyed(tenant: &str, key: &str) -> Ticket {
    ticket(tenant, Priority::Normal).with_dedup_key(key)
}

#[tokio::test(start_paused = true)]
async fn duplicates_run_once_and_share_the_result() {
    let queue = Queue::new(config(4, 10, 10));
    let executions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let (queue, executions) = (queue.clone(), Arc::clone(&executions));
            tokio::spawn(async move {
                match queue.admit(keyed("acme", "req-1")).await.unwrap() {
                    Admission::Run(permit) => {
                        executions.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        permit.complete(Arc::from("answer"));
                        Arc::from("answer")
                    }
                    Admission::Joined(answer) => answer,
                }
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(&*task.await.unwrap(), "answer");
    }
    assert_eq!(executions.load(std::sync::atomic::Ordering::SeqCst), 1);
    let stats = queue.stats();
    assert_eq!(
        (stats.dispatched, stats.deduplicated, stats.flights),
        (1, 2, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_joiner_waits_for_a_queued_leader() {
    let queue = Queue::new(config(1, 10, 10));
    let blocker = hold(&queue, "x").await;
    let mut leader = pin!(queue.admit(keyed("acme", "k")));
    let mut joiner = pin!(queue.admit(keyed("acme", "k")));
    assert!(poll_once(leader.as_mut()).is_pending());
    assert!(poll_once(joiner.as_mut()).is_pending());
    // The joiner takes no place in the queue.
    assert_eq!(queue.stats().queued(), 1);
    assert_eq!(queue.tenant_depth("acme"), 1);

    drop(blocker);
    let Poll::Ready(Ok(Admission::Run(permit))) = poll_once(leader.as_mut()) else {
        panic!("leader runs");
    };
    assert!(permit.is_leader());
    assert!(poll_once(joiner.as_mut()).is_pending(), "no result yet");
    permit.complete(Arc::from("done"));
    let Poll::Ready(Ok(Admission::Joined(answer))) = poll_once(joiner.as_mut()) else {
        panic!("joiner gets the result");
    };
    assert_eq!(&*answer, "done");
}

#[tokio::test(start_paused = true)]
async fn a_leader_dropped_while_queued_fails_its_joiners() {
    let queue = Queue::new(config(1, 10, 10));
    let blocker = hold(&queue, "x").await;
    let mut leader = Box::pin(queue.admit(keyed("acme", "k")));
    let mut joiner = pin!(queue.admit(keyed("acme", "k")));
    assert!(poll_once(leader.as_mut()).is_pending());
    assert!(poll_once(joiner.as_mut()).is_pending());

    drop(leader);
    assert_eq!(
        poll_once(joiner.as_mut()).map(|r| r.map(|_| ())),
        Poll::Ready(Err(Error::LeaderCancelled))
    );
    let stats = queue.stats();
    assert_eq!((stats.queued(), stats.flights, stats.cancelled), (0, 0, 1));
    drop(blocker);
}

#[tokio::test(start_paused = true)]
async fn a_leader_dropping_its_permit_fails_its_joiners_and_frees_the_key() {
    let queue = Queue::new(config(2, 10, 10));
    let Admission::Run(permit) = queue.admit(keyed("acme", "k")).await.unwrap() else {
        panic!("first one leads");
    };
    let mut joiner = pin!(queue.admit(keyed("acme", "k")));
    assert!(poll_once(joiner.as_mut()).is_pending());
    drop(permit);
    assert!(matches!(
        poll_once(joiner.as_mut()),
        Poll::Ready(Err(Error::LeaderCancelled))
    ));

    // The key is free: the retry leads a new flight.
    let retry = queue.admit(keyed("acme", "k")).await.unwrap();
    assert!(matches!(retry, Admission::Run(ref p) if p.is_leader()));
}

#[tokio::test(start_paused = true)]
async fn the_key_is_free_once_the_leader_finishes() {
    let queue = Queue::new(config(1, 10, 10));
    let Admission::Run(first) = queue.admit(keyed("acme", "k")).await.unwrap() else {
        panic!("leads");
    };
    first.complete(Arc::from("one"));
    assert_eq!(queue.stats().flights, 0);
    let Admission::Run(second) = queue.admit(keyed("acme", "k")).await.unwrap() else {
        panic!("a request after the first finished runs again");
    };
    second.complete(Arc::from("two"));
    assert_eq!(queue.stats().dispatched, 2);
}

#[tokio::test(start_paused = true)]
async fn keys_are_scoped_to_the_tenant() {
    let queue = Queue::new(config(2, 10, 10));
    let a = queue.admit(keyed("a", "same")).await.unwrap();
    let b = queue.admit(keyed("b", "same")).await.unwrap();
    assert!(matches!((&a, &b), (Admission::Run(_), Admission::Run(_))));
    assert_eq!(queue.stats().deduplicated, 0);
}

#[tokio::test(start_paused = true)]
async fn a_joiner_gives_up_at_its_own_deadline() {
    let queue = Queue::new(config(1, 10, 10));
    let Admission::Run(leader) = queue.admit(keyed("acme", "k")).await.unwrap() else {
        panic!("leads");
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let joined = queue.admit(Ticket::new("acme", deadline).with_dedup_key("k"));
    assert_eq!(joined.await.map(|_| ()), Err(Error::DeadlineExceeded));
    assert_eq!(Instant::now(), deadline);
    assert_eq!(queue.stats().expired, 1);
    // The leader is unaffected and its key still joinable.
    assert!(leader.is_leader());
    assert_eq!(queue.stats().flights, 1);
    leader.complete(Arc::from("late"));
}

#[tokio::test(start_paused = true)]
async fn a_dispatched_leader_frees_its_slot_but_keeps_its_joiners() {
    let queue = Queue::new(config(1, 10, 10));
    let mut leader = match queue.admit(keyed("acme", "k")).await.unwrap() {
        Admission::Run(p) => p,
        Admission::Joined(_) => panic!("first is the leader"),
    };
    leader.dispatched();
    leader.dispatched();
    assert_eq!(queue.stats().in_flight, 0, "the slot is back");
    // Another request gets the only slot while the leader still runs.
    let other = queue.admit(ticket("acme", Priority::Normal)).await.unwrap();
    let mut joiner = pin!(queue.admit(keyed("acme", "k")));
    assert!(poll_once(joiner.as_mut()).is_pending());
    leader.complete(Arc::from("answer"));
    match poll_once(joiner.as_mut()) {
        Poll::Ready(Ok(Admission::Joined(a))) => assert_eq!(&*a, "answer"),
        other => panic!("{other:?}"),
    }
    drop(other);
    assert_eq!(queue.stats().in_flight, 0);
}
