//! Many tasks on a multi-thread runtime, some of them not waiting at all:
//! the concurrency bound holds and every slot comes back.

mod support;

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use sluice_admit::{
    Admission, AdmissionQueue, Bulkhead, Error, PoolConfig, Priority, QueueConfig, Ticket, Weights,
};
use support::{config, poll_once, weight};
use tokio::time::{Instant, timeout};

const CONCURRENCY: usize = 4;
const TASKS: usize = 1_500;
const BURST: usize = 500;

#[derive(Default)]
struct Tally {
    running: AtomicUsize,
    max_running: AtomicUsize,
    runs: AtomicUsize,
    joined: AtomicUsize,
    full: AtomicUsize,
    would_wait: AtomicUsize,
    expired: AtomicUsize,
    leader_cancelled: AtomicUsize,
    gave_up: AtomicUsize,
}

async fn one(i: usize, queue: AdmissionQueue<usize>, pool: Bulkhead, tally: Arc<Tally>) {
    // A burst that overflows the queue, then arrivals spread over ~200 ms
    // in a scrambled order that keep it busy.
    if i >= BURST {
        tokio::time::sleep(Duration::from_micros((i * 7919 % 200_000) as u64)).await;
    }
    let deadline = Instant::now()
        + if i.is_multiple_of(5) {
            Duration::from_micros(200)
        } else {
            Duration::from_secs(30)
        };
    let mut ticket =
        Ticket::new(format!("t{}", i % 7), deadline).with_priority(Priority::ALL[i % 3]);
    if i.is_multiple_of(4) {
        // Twenty keys, each always from the same tenant: plenty of joining.
        let key = (i / 4) % 20;
        ticket.tenant = format!("t{}", key % 7).into();
        ticket = ticket.with_dedup_key(format!("k{key}"));
    }
    let admitted = if i.is_multiple_of(11) {
        // Callers that will not wait: a slot now or a refusal now.
        queue.try_admit(ticket).map(Admission::Run)
    } else if i.is_multiple_of(9) {
        // Callers that give up at an arbitrary point, queued or granted.
        match timeout(Duration::from_micros((i % 300) as u64), queue.admit(ticket)).await {
            Ok(result) => result,
            Err(_) => {
                tally.gave_up.fetch_add(1, SeqCst);
                return;
            }
        }
    } else {
        queue.admit(ticket).await
    };
    match admitted {
        Ok(Admission::Run(permit)) => {
            let now = tally.running.fetch_add(1, SeqCst) + 1;
            tally.max_running.fetch_max(now, SeqCst);
            assert!(now <= CONCURRENCY, "{now} running");
            tally.runs.fetch_add(1, SeqCst);
            let slot = pool
                .acquire(Instant::now() + Duration::from_secs(30))
                .await
                .unwrap();
            assert!(pool.stats().in_use <= 2);
            if i.is_multiple_of(10) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            } else {
                tokio::task::yield_now().await;
            }
            drop(slot);
            tally.running.fetch_sub(1, SeqCst);
            permit.complete(i);
        }
        Ok(Admission::Joined(_)) => _ = tally.joined.fetch_add(1, SeqCst),
        Err(Error::QueueFull { .. }) => _ = tally.full.fetch_add(1, SeqCst),
        Err(Error::WouldWait { .. }) => _ = tally.would_wait.fetch_add(1, SeqCst),
        Err(Error::DeadlineExceeded) => _ = tally.expired.fetch_add(1, SeqCst),
        Err(Error::LeaderCancelled) => _ = tally.leader_cancelled.fetch_add(1, SeqCst),
        Err(e) => panic!("unexpected {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_never_exceeds_the_limit_and_every_slot_comes_back() {
    let queue: AdmissionQueue<usize> = AdmissionQueue::new(QueueConfig {
        starvation_guard: Some(weight(3)),
        weights: Weights::default().with("t0", weight(3)),
        ..config(CONCURRENCY, 60, 300)
    });
    let pool = Bulkhead::new("model", PoolConfig::new(2, TASKS));
    let tally = Arc::new(Tally::default());
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| tokio::spawn(one(i, queue.clone(), pool.clone(), Arc::clone(&tally))))
        .collect();
    for task in tasks {
        task.await.unwrap();
    }

    let t = &*tally;
    let load = |a: &AtomicUsize| a.load(SeqCst);
    assert!(load(&t.max_running) <= CONCURRENCY);
    assert!(load(&t.runs) > 0);
    let accounted = [
        &t.runs,
        &t.joined,
        &t.full,
        &t.would_wait,
        &t.expired,
        &t.leader_cancelled,
        &t.gave_up,
    ]
    .map(load)
    .iter()
    .sum::<usize>();
    assert_eq!(accounted, TASKS);

    let stats = queue.stats();
    assert_eq!(
        (
            stats.in_flight,
            stats.queued(),
            stats.queued_tenants,
            stats.flights
        ),
        (0, 0, 0, 0)
    );
    assert!(!stats.busy && !queue.is_busy());
    assert_eq!(stats.rejected as usize, load(&t.full) + load(&t.would_wait));
    // A caller that gave up after its grant was dispatched but never ran.
    let dispatched = stats.dispatched as usize;
    assert!((load(&t.runs)..=load(&t.runs) + load(&t.gave_up)).contains(&dispatched));
    assert!(stats.deduplicated as usize >= load(&t.joined) + load(&t.leader_cancelled));
    let pool_stats = pool.stats();
    assert_eq!((pool_stats.in_use, pool_stats.waiting), (0, 0));

    // Every slot is free again: all of them can be taken at once.
    let mut held = Vec::new();
    for i in 0..CONCURRENCY {
        let mut admit = pin!(queue.admit(Ticket::new(
            format!("after{i}"),
            Instant::now() + Duration::from_secs(1)
        )));
        match poll_once(admit.as_mut()) {
            std::task::Poll::Ready(Ok(Admission::Run(permit))) => held.push(permit),
            _ => panic!("slot {i} was not free"),
        }
    }
    assert_eq!(queue.stats().in_flight, CONCURRENCY);
}
