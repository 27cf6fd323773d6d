//! Limits shared by several replicas: they hold across replicas, for every
//! algorithm, with weighted costs, settle and all-or-nothing takes.

mod common;

use std::time::Duration;

use common::{config, prefix, redis_url, replica};
use sluice_limit::{Error, Limit, Rules};
use sluice_redis::Mode;

fn rules() -> Rules {
    // Long windows: refill during a test is a fraction of one token.
    let hour = Duration::from_secs(3600);
    Rules::new()
        .exact("tb", Limit::new(10, hour))
        .exact("gcra", Limit::gcra(10, hour))
        .exact("sw", Limit::sliding_window(5, hour))
        .exact("if", Limit::in_flight(3))
        .exact("a", Limit::new(10, hour))
        .exact("b", Limit::new(1, hour))
        .exact("slow", Limit::new(10, Duration::from_secs(1)).burst(1))
}

async fn two(mode: Mode) -> Option<(sluice_redis::RedisLimiter, sluice_redis::RedisLimiter)> {
    let url = redis_url()?;
    let p = prefix();
    let a = replica(config(&url, &p, "a", mode), rules()).await;
    let b = replica(config(&url, &p, "b", mode), rules()).await;
    Some((a, b))
}

/// 40 concurrent takes over two replicas: exactly the capacity is granted.
async fn capacity_holds(resource: &str, expected: usize) {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let mut tasks = Vec::new();
    for i in 0..40 {
        let l = if i % 2 == 0 { a.clone() } else { b.clone() };
        let r = resource.to_owned();
        tasks.push(tokio::spawn(async move { l.try_acquire(&r, 1).await }));
    }
    let mut granted = Vec::new();
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(g) => granted.push(g),
            Err(Error::RateLimited { .. }) => refused += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(granted.len(), expected, "{resource}");
    assert_eq!(refused, 40 - expected);
    assert!(granted.iter().all(|g| !g.is_local()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bucket_holds_across_replicas() {
    capacity_holds("tb", 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_holds_across_replicas() {
    capacity_holds("gcra", 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_holds_across_replicas() {
    capacity_holds("sw", 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_holds_across_replicas_and_comes_back_on_drop() {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let g1 = a.try_acquire("if", 1).await.unwrap();
    let _g2 = b.try_acquire("if", 2).await.unwrap();
    let e = a.try_acquire("if", 1).await.unwrap_err();
    // In-flight slots free up when grants are dropped, not after a time.
    assert!(
        matches!(
            e,
            Error::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(b.get_capacity("if").await.unwrap().in_flight, 3);
    drop(g1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let g = b.acquire("if", 1, Some(deadline)).await.unwrap();
    assert!(!g.is_local());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_elsewhere_wakes_a_waiter_blocked_on_a_later_part() {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let held = b.try_acquire("if", 3).await.unwrap();
    let waiter = tokio::spawn({
        let a = a.clone();
        async move {
            // The lease TTL is 30 s and the deadline 60 s: without the
            // release notice this would wait for one of them.
            let d = tokio::time::Instant::now() + Duration::from_secs(60);
            a.acquire_many(&[("a", 1), ("if", 1)], Some(d)).await
        }
    });
    for _ in 0..1000 {
        if a.get_capacity("a").await.unwrap().waiting > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(held);
    // Generous: the notice arrives in milliseconds; missing it costs 30 s.
    let g = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("woken by the release notice, not the lease expiry")
        .unwrap()
        .unwrap();
    assert_eq!(g.parts().count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_costs_and_settle_move_the_shared_bucket() {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let mut g = a.try_acquire("tb", 8).await.unwrap();
    assert!(b.try_acquire("tb", 3).await.is_err());
    // Paid 2 of the 8 reserved: 6 go back, for everyone.
    g.settle_part("tb", 2).unwrap();
    let mut got = None;
    for _ in 0..100 {
        if let Ok(g) = b.try_acquire("tb", 8).await {
            got = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(got.is_some(), "the refund reached the shared bucket");
    assert!(a.try_acquire("tb", 1).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_and_unknown_are_never() {
    let Some((a, _b)) = two(Mode::Exact).await else {
        return;
    };
    let e = a.try_acquire("tb", 11).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::InsufficientCapacity {
                cost: 11,
                capacity: 10,
                ..
            }
        ),
        "{e}"
    );
    let e = a.try_acquire("nope", 1).await.unwrap_err();
    assert!(
        matches!(e, Error::UnknownResource(ref r) if r == "nope"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_named_twice_is_taken_once_at_the_sum() {
    for mode in [Mode::Exact, Mode::Leased] {
        let Some((a, _b)) = two(mode).await else {
            return;
        };
        let g = a.try_acquire_many(&[("tb", 4), ("tb", 5)]).await.unwrap();
        assert_eq!(g.parts().collect::<Vec<_>>(), vec![("tb", 9)]);
        let e = a
            .try_acquire_many(&[("tb", 6), ("tb", 5)])
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::InsufficientCapacity { cost: 11, .. }),
            "{e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_are_all_or_nothing() {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let _held = b.try_acquire("b", 1).await.unwrap();
    let e = a.try_acquire_many(&[("a", 5), ("b", 1)]).await.unwrap_err();
    assert!(
        matches!(e, Error::RateLimited { ref resource, .. } if resource == "b"),
        "{e}"
    );
    // Nothing was taken from `a`.
    assert_eq!(a.get_capacity("a").await.unwrap().available, 10.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_order_without_polling() {
    let Some((a, _b)) = two(Mode::Exact).await else {
        return;
    };
    // Burst 1 at 10/s: one grant every 100 ms.
    let _first = a.try_acquire("slow", 1).await.unwrap();
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let (l, order) = (a.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let d = tokio::time::Instant::now() + Duration::from_secs(30);
            let _g = l.acquire("slow", 1, Some(d)).await.unwrap();
            order.lock().unwrap().push(i);
        }));
        // Queue them in a known order: the next starts once this one waits.
        for _ in 0..1000 {
            if a.get_capacity("slow").await.unwrap().waiting > i {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_past_the_deadline_fails_at_once() {
    let Some((a, _b)) = two(Mode::Exact).await else {
        return;
    };
    for _ in 0..10 {
        let _ = a.try_acquire("tb", 1).await.unwrap();
    }
    let d = tokio::time::Instant::now() + Duration::from_secs(60);
    let t0 = std::time::Instant::now();
    let e = a.acquire("tb", 1, Some(d)).await.unwrap_err();
    assert!(
        matches!(e, Error::DeadlinePassed { wait: Some(w), .. } if w > Duration::from_secs(60)),
        "{e}"
    );
    // It did not sit out the deadline (a generous bound).
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_has_a_ttl() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = replica(config(&url, &p, "a", Mode::Exact), rules()).await;
    let _g = a
        .try_acquire_many(&[("tb", 1), ("gcra", 1), ("sw", 1), ("if", 1)])
        .await
        .unwrap();
    a.report_throttled("tb", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{p}*"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(keys.len() >= 5, "{keys:?}");
    for k in keys {
        assert!(k.contains("{rl}"), "{k} carries the hash tag");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&k)
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(ttl > 0, "{k} has a TTL ({ttl})");
    }
}

/// A limit set at run time on a resource no rule knows (a job queue's
/// rate) is shared: both replicas together get its capacity, once; it can
/// be changed and removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_set_at_run_time_is_shared() {
    let Some((a, b)) = two(Mode::Exact).await else {
        return;
    };
    let hour = Duration::from_secs(3600);
    assert!(matches!(
        a.try_acquire("jobs:q", 1).await,
        Err(Error::UnknownResource(_))
    ));
    assert!(!a.contains("jobs:q"));
    for l in [&a, &b] {
        l.set_limit("jobs:q", Limit::sliding_window(4, hour))
            .unwrap();
    }
    assert!(a.contains("jobs:q") && b.contains("jobs:q"));
    let mut granted = Vec::new();
    let mut refused = 0;
    for i in 0..10 {
        let l = if i % 2 == 0 { &a } else { &b };
        match l.try_acquire("jobs:q", 1).await {
            Ok(g) => granted.push(g),
            Err(Error::RateLimited { .. }) => refused += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!((granted.len(), refused), (4, 6));
    assert!(granted.iter().all(|g| !g.is_local()));
    // Raised on both: the window already holds 4, so 2 more fit.
    for l in [&a, &b] {
        l.set_limit("jobs:q", Limit::sliding_window(6, hour))
            .unwrap();
    }
    let more = [
        a.try_acquire("jobs:q", 1).await.is_ok(),
        b.try_acquire("jobs:q", 1).await.is_ok(),
        a.try_acquire("jobs:q", 1).await.is_ok(),
    ];
    assert_eq!(more, [true, true, false]);
    // An invalid limit is refused and changes nothing.
    assert!(
        a.set_limit("jobs:q", Limit::sliding_window(0, hour))
            .is_err()
    );
    assert!(a.remove("jobs:q"));
    assert!(!a.remove("jobs:q"));
    assert!(matches!(
        a.try_acquire("jobs:q", 1).await,
        Err(Error::UnknownResource(_))
    ));
    // A set limit wins over a rule.
    a.set_limit("b", Limit::new(3, hour)).unwrap();
    let taken = [
        a.try_acquire("b", 1).await.is_ok(),
        a.try_acquire("b", 1).await.is_ok(),
    ];
    assert_eq!(taken, [true, true]);
}
