//! Lanes: each resource's requests have their own slots and fair queue, so
//! a slow resource cannot hold the slots an idle one needs.

mod support;

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use sluice_admit::{Admission, AdmissionQueue, Priority};
use support::{config, hold_ticket, poll_once, settle, ticket};

#[tokio::test(start_paused = true)]
async fn a_full_lane_does_not_block_another() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(2, 100, 200));
    let slow = |t| ticket(t, Priority::Normal).with_lane("anthropic/claude");
    // Both slots of the slow lane are held, and more wait behind them.
    let mut held = Vec::new();
    for _ in 0..2 {
        match queue.admit(slow("a")).await.unwrap() {
            Admission::Run(p) => held.push(p),
            Admission::Joined(()) => unreachable!(),
        }
    }
    let mut behind = pin!(queue.admit(slow("a")));
    assert!(poll_once(behind.as_mut()).is_pending());
    // Without lanes the queue would be full; the other lane runs at once.
    let fast = ticket("b", Priority::Normal).with_lane("api:slack");
    let mut quick = pin!(queue.admit(fast));
    assert!(matches!(
        poll_once(quick.as_mut()),
        Poll::Ready(Ok(Admission::Run(_)))
    ));
    // The shared default lane (no lane named) is separate again.
    let mut plain = pin!(queue.admit(ticket("c", Priority::Normal)));
    assert!(matches!(
        poll_once(plain.as_mut()),
        Poll::Ready(Ok(Admission::Run(_)))
    ));
    assert_eq!(queue.stats().queued(), 1);
    // A slot of the slow lane goes to the slow lane's next entry.
    drop(held.pop());
    assert!(matches!(
        poll_once(behind.as_mut()),
        Poll::Ready(Ok(Admission::Run(_)))
    ));
}

#[tokio::test(start_paused = true)]
async fn depth_limits_count_every_lane() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 2, 200));
    let lane = |l: &'static str| ticket("a", Priority::Normal).with_lane(l);
    let _one = queue.admit(lane("x")).await.unwrap();
    let _two = queue.admit(lane("y")).await.unwrap();
    // Slots held: the next two of tenant `a` queue, one in each lane...
    let queue2 = queue.clone();
    let waiting: Vec<_> = ["x", "y"]
        .into_iter()
        .map(|l| {
            let q = queue2.clone();
            tokio::spawn(async move { q.admit(lane(l)).await.map(|_| ()) })
        })
        .collect();
    settle().await;
    assert_eq!(queue.tenant_depth("a"), 2);
    // ...and the tenant limit (2) covers both lanes together.
    let err = queue.admit(lane("z")).await.map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("tenant"), "{err}");
    queue.close();
    for w in waiting {
        assert!(w.await.unwrap().is_err());
    }
}

#[tokio::test(start_paused = true)]
async fn idle_lanes_leave_no_state() {
    let queue: AdmissionQueue<Arc<str>> = AdmissionQueue::new(config(1, 100, 200));
    for i in 0..1_000 {
        let t = ticket("a", Priority::Normal).with_lane(format!("session-{i}"));
        match queue.admit(t).await.unwrap() {
            Admission::Run(p) => drop(p),
            Admission::Joined(_) => unreachable!(),
        }
    }
    let stats = queue.stats();
    assert_eq!((stats.in_flight, stats.queued()), (0, 0));
    assert!(format!("{queue:?}").len() < 1_000, "{queue:?}");
}

/// Fairness is kept across lanes: a tenant served in one lane waits behind
/// a tenant that was not, in another.
#[tokio::test(start_paused = true)]
async fn service_in_one_lane_counts_in_every_lane() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 100, 200));
    let in_lane = |t: &str, l: &'static str| ticket(t, Priority::Normal).with_lane(l);
    let (x, y) = (
        hold_ticket(&queue, in_lane("holder", "x")).await,
        hold_ticket(&queue, in_lane("holder", "y")).await,
    );
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (tenant, lane, label) in [
        ("a", "y", "a@y"),
        ("a", "y", "a@y"),
        ("a", "x", "a@x"),
        ("a", "x", "a@x"),
        ("b", "x", "b@x"),
        ("b", "x", "b@x"),
    ] {
        tasks.push(support::spawn_recorder(
            &queue,
            in_lane(tenant, lane),
            label,
            &log,
        ));
    }
    settle().await;
    // `a` is served twice in lane y...
    drop(y);
    settle().await;
    // ...so in lane x, `b` catches up before `a` goes again.
    drop(x);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        *log.lock().unwrap(),
        ["a@y", "a@y", "b@x", "b@x", "a@x", "a@x"]
    );
}

#[tokio::test(start_paused = true)]
async fn lanes_and_tenants_are_counted_for_dashboards() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 100, 200));
    let t = |tenant: &'static str, p, lane: &'static str| ticket(tenant, p).with_lane(lane);
    let _running = queue.admit(t("a", Priority::Normal, "m")).await.unwrap();
    let q = queue.clone();
    let waiting: Vec<_> = [
        ("a", Priority::High, "m"),
        ("b", Priority::Low, "m"),
        ("b", Priority::Normal, "m"),
    ]
    .into_iter()
    .map(|(tenant, p, lane)| {
        let q = q.clone();
        tokio::spawn(async move { q.admit(t(tenant, p, lane)).await.map(|_| ()) })
    })
    .collect();
    settle().await;
    let lanes = queue.lanes();
    assert_eq!(lanes.len(), 1, "{lanes:?}");
    assert_eq!(&*lanes[0].lane, "m");
    assert_eq!(lanes[0].queued_by_priority, [1, 1, 1]);
    assert_eq!(lanes[0].queued(), 3);
    assert_eq!(lanes[0].in_flight, 1);
    // Deepest tenant first; the limit cuts the list.
    let depths = queue.tenant_depths(10);
    let named: Vec<(&str, usize)> = depths.iter().map(|(t, n)| (&**t, *n)).collect();
    assert_eq!(named, [("b", 2), ("a", 1)]);
    assert_eq!(queue.tenant_depths(1).len(), 1);
    // Two tenants wait in `m` (`b` in two classes counts once); none
    // elsewhere, and the running entry is not waiting.
    assert_eq!(queue.lane_weight("m"), 2);
    assert_eq!(queue.lane_weight("other"), 0);
    queue.close();
    for w in waiting {
        assert!(w.await.unwrap().is_err());
    }
    drop(_running);
    assert!(queue.lanes().is_empty());
}

/// A lane's weight sums its waiting tenants' weights: what the replica
/// claims of a limit it shares with others.
#[tokio::test(start_paused = true)]
async fn a_lane_weighs_its_waiting_tenants() {
    let mut cfg = config(1, 100, 200);
    cfg.weights = cfg
        .weights
        .with("heavy", std::num::NonZeroU32::new(3).unwrap());
    let queue: AdmissionQueue = AdmissionQueue::new(cfg);
    let t = |tenant: &'static str| ticket(tenant, Priority::Normal).with_lane("m");
    let _running = queue.admit(t("light")).await.unwrap();
    assert_eq!(queue.lane_weight("m"), 0);
    let q = queue.clone();
    let waiting: Vec<_> = ["heavy", "heavy", "light"]
        .into_iter()
        .map(|tenant| {
            let q = q.clone();
            tokio::spawn(async move { q.admit(t(tenant)).await.map(|_| ()) })
        })
        .collect();
    settle().await;
    assert_eq!(queue.lane_weight("m"), 4);
    queue.close();
    for w in waiting {
        assert!(w.await.unwrap().is_err());
    }
    assert_eq!(queue.lane_weight("m"), 0);
}

/// A ticket granted at once, its lane idle, is charged to its tenant as a
/// queued one is when it is dispatched: it counts against the tenant
/// wherever the tenant waits next.
#[tokio::test(start_paused = true)]
async fn a_grant_at_once_counts_as_service() {
    let queue: AdmissionQueue = AdmissionQueue::new(config(1, 100, 200));
    let in_lane = |t: &str, l: &'static str| ticket(t, Priority::Normal).with_lane(l);
    let x = hold_ticket(&queue, in_lane("holder", "x")).await;
    // `a` is served in lane y, which is idle: granted at once.
    drop(hold_ticket(&queue, in_lane("a", "y")).await);
    assert_eq!(queue.stats().dispatched, 2);
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (tenant, label) in [("a", "a@x"), ("b", "b@x")] {
        tasks.push(support::spawn_recorder(
            &queue,
            in_lane(tenant, "x"),
            label,
            &log,
        ));
        settle().await;
    }
    drop(x);
    for t in tasks {
        t.await.unwrap();
    }
    // `b`, served nowhere yet, goes before `a`, which came first.
    assert_eq!(*log.lock().unwrap(), ["b@x", "a@x"]);
}
