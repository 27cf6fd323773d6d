//! Acquire: FIFO waiting, deadlines, cancellation, close, capacity changes.
//! Every timing rule runs on tokio's paused clock.

mod common;

use std::time::Duration;

use common::{poll_once, ready};
use sluice_limit::{AdaptiveConfig, Error, Limit, Limiter, Rules};
use tokio::time::{Instant, advance};

const MS: Duration = Duration::from_millis(1);

fn limiter(rules: Rules) -> Limiter {
    Limiter::new(rules).unwrap()
}

#[tokio::test(start_paused = true)]
async fn waits_exactly_until_tokens_are_due() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(10).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut a = l.acquire("r", 1, None);
    assert!(poll_once(&mut a).is_pending());
    advance(99 * MS).await;
    assert!(poll_once(&mut a).is_pending(), "not before 100 ms");
    advance(MS).await;
    assert!(ready(poll_once(&mut a)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn fifo_order_under_contention() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(1).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut tasks = Vec::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..20 {
        let l = l.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let _g = l.acquire("r", 1, None).await.unwrap();
            tx.send(i).unwrap();
        }));
        // Let each task enqueue before the next one starts.
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
    }
    drop(tx);
    let start = Instant::now();
    let mut order = Vec::new();
    while let Some(i) = rx.recv().await {
        order.push(i);
    }
    assert_eq!(order, (0..20).collect::<Vec<_>>());
    // One per second after the first token: exactly 20 s of paused time.
    assert_eq!(Instant::now() - start, Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn a_big_cost_at_the_head_is_not_overtaken() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(10)));
    let _g = l.try_acquire("r", 10).unwrap();
    let mut big = l.acquire("r", 10, None);
    assert!(poll_once(&mut big).is_pending());
    advance(100 * MS).await;
    // One token is there, but the head needs ten: a newcomer must queue.
    let err = l.try_acquire("r", 1).unwrap_err();
    assert!(matches!(err, Error::RateLimited { .. }));
    assert_eq!(err.retry_after(), Some(Duration::from_millis(1000)));
    advance(900 * MS).await;
    assert!(ready(poll_once(&mut big)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn check_never_jumps_ahead_of_a_waiter() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(10)));
    let h = l.handle("r").unwrap();
    assert!(h.check(10).is_ok(), "the lock-free path takes the burst");
    let mut big = l.acquire("r", 10, None);
    assert!(poll_once(&mut big).is_pending());
    advance(100 * MS).await;
    // One token is there, but it is the waiter's.
    for err in [l.check("r", 1).unwrap_err(), h.check(1).unwrap_err()] {
        assert!(matches!(err, Error::RateLimited { .. }));
        assert_eq!(err.retry_after(), Some(Duration::from_millis(1000)));
    }
    advance(900 * MS).await;
    assert!(ready(poll_once(&mut big)).is_ok());
    drop(big);
    advance(100 * MS).await;
    assert!(h.check(1).is_ok(), "the queue is empty again");
    assert!(h.check(1).is_err());
}

#[tokio::test(start_paused = true)]
async fn cost_above_burst_is_never() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(3).burst(10)));
    let err = l.acquire("r", 11, None).await.unwrap_err();
    assert_eq!(
        err,
        Error::InsufficientCapacity {
            resource: "r".into(),
            cost: 11,
            capacity: 10
        }
    );
    assert!(matches!(
        l.try_acquire("r", 11),
        Err(Error::InsufficientCapacity { .. })
    ));
    assert_eq!(
        l.try_acquire("x", 1).unwrap_err(),
        Error::UnknownResource("x".into())
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_known_to_be_missed_fails_at_once_with_the_wait() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(1).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut a = l.acquire("r", 1, Some(deadline));
    match ready(poll_once(&mut a)) {
        Err(Error::DeadlinePassed { resource, wait }) => {
            assert_eq!(resource, "r");
            assert_eq!(wait, Some(Duration::from_secs(1)));
        }
        other => panic!("{other:?}"),
    }
    // Nothing was consumed: a deadline that fits still gets the next token.
    let ok = l
        .acquire("r", 1, Some(Instant::now() + Duration::from_secs(1)))
        .await;
    assert!(ok.is_ok());
}

#[tokio::test(start_paused = true)]
async fn deadline_passing_while_queued_leaves_and_consumes_nothing() {
    let l = limiter(Rules::new().exact("slots", Limit::in_flight(1)));
    let held = l.try_acquire("slots", 1).unwrap();
    let mut a = l.acquire("slots", 1, Some(Instant::now() + 200 * MS));
    assert!(poll_once(&mut a).is_pending());
    assert_eq!(l.get_capacity("slots").unwrap().waiting, 1);
    advance(199 * MS).await;
    assert!(poll_once(&mut a).is_pending());
    advance(MS).await;
    assert!(matches!(
        ready(poll_once(&mut a)),
        Err(Error::DeadlinePassed { wait: None, .. })
    ));
    assert_eq!(l.get_capacity("slots").unwrap().waiting, 0);
    drop(held);
    assert!(l.try_acquire("slots", 1).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_future_polled_once_and_dropped_leaves_the_queue() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(1).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut first = l.acquire("r", 1, None);
    assert!(poll_once(&mut first).is_pending());
    let mut second = l.acquire("r", 1, None);
    assert!(poll_once(&mut second).is_pending());
    drop(first);
    assert_eq!(l.get_capacity("r").unwrap().waiting, 1);
    advance(Duration::from_secs(1)).await;
    assert!(ready(poll_once(&mut second)).is_ok());
    assert_eq!(l.get_capacity("r").unwrap().waiting, 0);
    // The dropped one took nothing: after another second a token is there.
    advance(Duration::from_secs(1)).await;
    assert!(l.try_acquire("r", 1).is_ok());
}

#[tokio::test(start_paused = true)]
async fn one_wake_serves_everyone_due_in_order() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(10_000).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut queued: Vec<_> = (0..30).map(|_| l.acquire("r", 1, None)).collect();
    for a in &mut queued {
        assert!(poll_once(a).is_pending());
    }
    // Ten tokens come due in 1 ms (one timer tick); the head's one
    // wake-up grants all ten, dated when each came due, before anyone
    // else is polled.
    advance(MS).await;
    assert!(ready(poll_once(&mut queued[0])).is_ok());
    let c = l.get_capacity("r").unwrap();
    assert_eq!((c.waiting, c.in_flight), (20, 10));
    for a in &mut queued[1..10] {
        assert!(ready(poll_once(a)).is_ok());
    }
    // FIFO: the eleventh waits for its own token, the next tick serves
    // the next ten.
    assert!(poll_once(&mut queued[10]).is_pending());
    assert!(poll_once(&mut queued[11]).is_pending());
    advance(MS).await;
    assert!(
        poll_once(&mut queued[11]).is_pending(),
        "not before the head"
    );
    for a in &mut queued[10..20] {
        assert!(ready(poll_once(a)).is_ok());
    }
    assert!(poll_once(&mut queued[20]).is_pending());
}

/// Under load a serving thread looks at its timers late; what is due
/// goes when the resource is next touched, by a newcomer or a grant let
/// go, without waiting for the head's timer.
#[tokio::test(start_paused = true)]
async fn a_newcomer_or_a_grant_let_go_serves_what_is_due_in_passing() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(10).burst(1)));
    let g = l.try_acquire("r", 1).unwrap();
    let mut head = l.acquire("r", 1, None);
    let mut next = l.acquire("r", 1, None);
    assert!(poll_once(&mut head).is_pending());
    assert!(poll_once(&mut next).is_pending());
    // The head's token is due; its task is not polled.
    advance(100 * MS).await;
    let mut newcomer = l.acquire("r", 1, None);
    assert!(poll_once(&mut newcomer).is_pending());
    assert_eq!(l.get_capacity("r").unwrap().waiting, 2, "the head went");
    advance(100 * MS).await;
    drop(g);
    assert_eq!(l.get_capacity("r").unwrap().waiting, 1, "the next went");
    assert!(ready(poll_once(&mut head)).is_ok());
    assert!(ready(poll_once(&mut next)).is_ok());
    // FIFO: the newcomer's token is not due yet.
    assert!(poll_once(&mut newcomer).is_pending());
    advance(100 * MS).await;
    assert!(ready(poll_once(&mut newcomer)).is_ok());
}

/// The jitter margin is held once per busy period (issue 41). A bucket
/// that fills up while waiters queue (the machine stalled the serving
/// thread for longer than the burst lasts) did not start a new one: when
/// the queue is served, a full burst goes, not one call and then the
/// margin's wait, which cost the rate at every stall.
#[tokio::test(start_paused = true)]
async fn a_bucket_that_fills_while_waiters_queue_holds_no_margin_again() {
    let l = Limiter::builder()
        .rules(Rules::new().exact("r", Limit::per_second(1_000).burst(10)))
        .adaptive(AdaptiveConfig {
            jitter_margin: 20 * MS,
            ..AdaptiveConfig::default()
        })
        .build()
        .unwrap();
    // The start of a busy period: found full, so the margin is held (from
    // time, since the burst has no room for 20 ms at 1,000/s).
    advance(100 * MS).await;
    let _first = l.try_acquire("r", 1).unwrap();
    assert!(l.try_acquire("r", 1).is_err(), "the margin is held once");
    let mut queued: Vec<_> = (0..30).map(|_| l.acquire("r", 1, None)).collect();
    for a in &mut queued {
        assert!(poll_once(a).is_pending());
    }
    // Nobody is polled for 100 ms: the bucket fills while they queue.
    advance(100 * MS).await;
    assert!(ready(poll_once(&mut queued[0])).is_ok());
    // The head's pass lets go the burst (and what came due in the 2 ms a
    // grant is dated back), not one call.
    let went = 1 + queued[1..]
        .iter_mut()
        .map(|a| poll_once(a).is_ready())
        .filter(|r| *r)
        .count();
    assert!((10..=12).contains(&went), "{went} went");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_served_but_dropped_gives_its_grant_back() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(1_000).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut first = l.acquire("r", 1, None);
    let mut second = l.acquire("r", 1, None);
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    advance(2 * MS).await;
    // The head's pass grants the second too; it goes without taking it.
    let held = ready(poll_once(&mut first)).unwrap();
    assert_eq!(l.get_capacity("r").unwrap().in_flight, 3);
    drop(second);
    assert_eq!(l.get_capacity("r").unwrap().in_flight, 2);
    // Its token is back: there at 2 ms, not 3 ms.
    assert!(l.try_acquire("r", 1).is_ok());
    assert!(l.try_acquire("r", 1).is_err());
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn dropped_head_wakes_the_next() {
    let l = limiter(Rules::new().exact("slots", Limit::in_flight(1)));
    let g = l.try_acquire("slots", 1).unwrap();
    let l2 = l.clone();
    let head = tokio::spawn(async move { l2.acquire("slots", 1, None).await.map(drop) });
    let l3 = l.clone();
    let next = tokio::spawn(async move { l3.acquire("slots", 1, None).await.map(drop) });
    tokio::task::yield_now().await;
    head.abort();
    let _ = head.await;
    drop(g);
    assert!(next.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn in_flight_slots_come_back_on_drop() {
    let l = limiter(Rules::new().exact("slots", Limit::in_flight(2)));
    let a = l.try_acquire("slots", 1).unwrap();
    let _b = l.try_acquire("slots", 1).unwrap();
    let err = l.try_acquire("slots", 1).unwrap_err();
    assert_eq!(err.retry_after(), None, "not a matter of time");
    let mut waiting = l.acquire("slots", 1, None);
    assert!(poll_once(&mut waiting).is_pending());
    assert_eq!(l.get_capacity("slots").unwrap().in_flight, 2);
    drop(a);
    assert!(ready(poll_once(&mut waiting)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn capacity_changes_reach_queued_waiters() {
    let l = limiter(Rules::new().exact("r", Limit::per_second(1).burst(1)));
    let _g = l.try_acquire("r", 1).unwrap();
    let mut a = l.acquire("r", 1, None);
    assert!(poll_once(&mut a).is_pending());
    // Ten per second: the head's wait shrinks from 1 s to 100 ms.
    l.set_capacity("r", 10, Duration::from_secs(1)).unwrap();
    assert!(poll_once(&mut a).is_pending());
    advance(100 * MS).await;
    assert!(ready(poll_once(&mut a)).is_ok());
    let cap = l.get_capacity("r").unwrap();
    // The burst keeps its ratio to capacity.
    assert_eq!((cap.total, cap.burst), (10, 10));
}

#[tokio::test(start_paused = true)]
async fn set_capacity_new_full_existing_capped_and_invalid_rejected() {
    let l = limiter(Rules::new());
    l.set_capacity("openai-api", 60, Duration::from_secs(60))
        .unwrap();
    assert_eq!(l.get_capacity("openai-api").unwrap().available, 60.0);
    for _ in 0..10 {
        l.try_acquire("openai-api", 1).unwrap().release();
    }
    l.set_capacity("openai-api", 30, Duration::from_secs(60))
        .unwrap();
    assert_eq!(l.get_capacity("openai-api").unwrap().available, 30.0);
    assert!(matches!(
        l.set_capacity("x", 0, Duration::from_secs(1)),
        Err(Error::InvalidCapacity { .. })
    ));
    assert!(matches!(
        l.set_capacity("x", 1, Duration::ZERO),
        Err(Error::InvalidWindow(_))
    ));
    assert!(l.remove("openai-api"));
    assert!(matches!(
        l.try_acquire("openai-api", 1),
        Err(Error::UnknownResource(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn close_wakes_every_waiter() {
    let l = limiter(Rules::new().exact("slots", Limit::in_flight(1)));
    let _g = l.try_acquire("slots", 1).unwrap();
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire("slots", 1, None).await.map(drop) })
        })
        .collect();
    tokio::task::yield_now().await;
    l.close();
    for w in waiters {
        assert_eq!(w.await.unwrap(), Err(Error::Closed));
    }
    assert_eq!(l.try_acquire("slots", 1).unwrap_err(), Error::Closed);
}

#[tokio::test(start_paused = true)]
async fn many_resources_all_or_nothing() {
    let rules = Rules::new()
        .exact("req", Limit::per_second(10))
        .exact("tok", Limit::per_minute(1_000));
    let l = limiter(rules);
    let _g = l.try_acquire("tok", 1_000).unwrap();
    // Tokens are short: the request slot must not be spent meanwhile.
    let mut a = l.acquire_many(&[("req", 1), ("tok", 500)], None);
    assert!(poll_once(&mut a).is_pending());
    assert_eq!(l.get_capacity("req").unwrap().available, 10.0);
    assert!(matches!(
        l.try_acquire_many(&[("req", 1), ("tok", 1)]),
        Err(Error::RateLimited { .. })
    ));
    advance(Duration::from_secs(30)).await;
    let mut g = ready(poll_once(&mut a)).unwrap();
    assert_eq!(l.get_capacity("req").unwrap().available, 9.0);
    g.settle_part("tok", 100).unwrap();
    assert_eq!(l.get_capacity("tok").unwrap().available, 400.0);
    assert!(g.settle_part("nope", 1).is_err());
}

#[tokio::test(start_paused = true)]
async fn crossing_multi_waiters_do_not_deadlock() {
    let l = limiter(
        Rules::new()
            .exact("a", Limit::in_flight(1))
            .exact("b", Limit::in_flight(1)),
    );
    let ga = l.try_acquire("a", 1).unwrap();
    let gb = l.try_acquire("b", 1).unwrap();
    let l1 = l.clone();
    let t1 =
        tokio::spawn(async move { l1.acquire_many(&[("a", 1), ("b", 1)], None).await.map(drop) });
    let l2 = l.clone();
    let t2 =
        tokio::spawn(async move { l2.acquire_many(&[("b", 1), ("a", 1)], None).await.map(drop) });
    tokio::task::yield_now().await;
    drop(ga);
    drop(gb);
    assert!(t1.await.unwrap().is_ok());
    assert!(t2.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn settle_refunds_and_debits() {
    let l = limiter(Rules::new().exact("tok", Limit::per_minute(6_000)));
    let mut g = l.try_acquire("tok", 1_000).unwrap();
    g.settle(1_000);
    assert_eq!(l.get_capacity("tok").unwrap().available, 5_000.0);
    g.settle(200);
    assert_eq!(l.get_capacity("tok").unwrap().available, 5_800.0);
    g.settle(7_000);
    assert_eq!(l.get_capacity("tok").unwrap().available, -1_000.0);
    // In debt: even one token waits until the debt is repaid.
    let err = l.try_acquire("tok", 1).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_millis(10_010)));
}

#[tokio::test(start_paused = true)]
async fn held_grants_by_id_and_leases() {
    let l = limiter(Rules::new().exact("slots", Limit::in_flight(2)));
    let id = l.hold(l.try_acquire("slots", 1).unwrap(), Duration::from_secs(10));
    let lost = l.hold(l.try_acquire("slots", 1).unwrap(), Duration::from_secs(10));
    assert_eq!(l.get_capacity("slots").unwrap().in_flight, 2);
    l.release(id, None).unwrap();
    assert_eq!(l.release(id, None), Err(Error::UnknownGrant(id.0)));
    advance(Duration::from_secs(10)).await;
    assert_eq!(l.sweep().expired_leases, 1);
    assert_eq!(l.get_capacity("slots").unwrap().in_flight, 0);
    assert!(l.release(lost, None).is_err());
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_evicted_without_losing_state() {
    let l = limiter(Rules::new().prefix("session:", Limit::per_second(1).burst(2)));
    for i in 0..10_000 {
        l.try_acquire(&format!("session:{i}"), 1).unwrap().release();
    }
    // Creation sweeps as it goes, but nothing is full yet.
    assert_eq!(l.len(), 10_000);
    let _busy = l.try_acquire("session:0", 1).unwrap();
    advance(Duration::from_secs(1)).await;
    let stats = l.sweep();
    assert_eq!(stats.evicted, 9_999);
    assert_eq!(l.len(), 1, "the key with a grant held stays");
    // A recreated key is full, as the evicted one was.
    assert_eq!(l.get_capacity("session:5").unwrap().available, 2.0);
}

#[tokio::test(start_paused = true)]
async fn keys_only_checked_are_swept_from_their_word() {
    let l = limiter(Rules::new().prefix("session:", Limit::per_second(1).burst(2)));
    let names: Vec<String> = (0..1_000).map(|i| format!("session:{i}")).collect();
    for n in &names {
        assert!(l.check(n, 2).is_ok());
    }
    advance(Duration::from_millis(1_500)).await;
    assert_eq!(l.sweep().evicted, 0, "not full yet");
    // The sweep kept what each key had: a token and a half.
    for n in &names {
        assert!(l.check(n, 2).is_err());
        assert!(l.check(n, 1).is_ok());
    }
    advance(Duration::from_secs(2)).await;
    assert_eq!(l.sweep().evicted, 1_000);
    assert!(l.is_empty());
    // Back from the rule, full.
    assert!(l.check(&names[7], 2).is_ok());
}

/// The sweeps that creating keys runs leave keys that have been full for
/// less than a second (called again soon, they would only be created
/// again), and drop those full for longer.
#[tokio::test(start_paused = true)]
async fn creation_sweeps_leave_keys_that_just_refilled() {
    // One shard: its first sweep comes when it holds 64 keys.
    let l = Limiter::builder()
        .shards(1)
        .rules(Rules::new().prefix("k:", Limit::per_second(1_000).burst(1)))
        .build()
        .unwrap();
    let check = |from: usize, to: usize| {
        for i in from..to {
            assert!(l.check(&format!("k:{i}"), 1).is_ok());
        }
    };
    check(0, 64);
    advance(Duration::from_millis(100)).await;
    // Full for about 80 ms: the sweep this creation runs keeps them.
    check(64, 65);
    assert_eq!(l.len(), 65);
    advance(Duration::from_secs(2)).await;
    // The next sweep (at 130) drops the 65 full for seconds, not the
    // 65 just created.
    check(65, 131);
    assert_eq!(l.len(), 66);
}

/// `try_acquire` by name finds the resource in the thread's cache; one
/// dropped from the map since (removed, or evicted idle) is never taken
/// from again: the name is looked up afresh.
#[tokio::test(start_paused = true)]
async fn try_acquire_by_name_never_takes_from_a_resource_dropped_from_the_map() {
    let l = limiter(Rules::new().prefix("k:", Limit::per_second(1).burst(1)));
    l.try_acquire("k:a", 1).unwrap().release();
    assert!(l.try_acquire("k:a", 1).is_err(), "empty");
    assert!(l.remove("k:a"));
    // Created again from its rule, full.
    l.try_acquire("k:a", 1).unwrap().release();
    assert!(l.try_acquire("k:a", 1).is_err());
    // Idle (full) and evicted: the one created again is full too, and
    // what is taken from it is counted there.
    advance(Duration::from_secs(2)).await;
    assert_eq!(l.sweep().evicted, 1);
    l.try_acquire("k:a", 1).unwrap().release();
    assert!(l.try_acquire("k:a", 1).is_err());
    assert_eq!(l.get_capacity("k:a").unwrap().available, 0.0);
}
