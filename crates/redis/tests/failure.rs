//! Redis away: fail open on the local 1/N share or fail closed; never a
//! hang past the timeout; shared limits resume when Redis returns.

mod common;

use std::time::{Duration, Instant};

use common::{OwnRedis, config, eventually, prefix, replica};
use sluice_limit::{Error, Limit, Rules};
use sluice_redis::{Failure, Mode, RedisLimiter};

fn rules() -> Rules {
    Rules::new().exact("api:x", Limit::new(10, Duration::from_secs(3600)))
}

async fn count_grants(l: &RedisLimiter, n: usize) -> (usize, usize, Vec<sluice_redis::RedisGrant>) {
    let (mut local, mut shared, mut held) = (0, 0, Vec::new());
    for _ in 0..n {
        if let Ok(g) = l.try_acquire("api:x", 1).await {
            if g.is_local() {
                local += 1;
            } else {
                shared += 1;
            }
            held.push(g);
        }
    }
    (local, shared, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_serves_the_local_share_and_shared_limits_resume() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let p = prefix();
    let a = replica(config(&redis.url(), &p, "a", Mode::Exact), rules()).await;
    let b = replica(config(&redis.url(), &p, "b", Mode::Exact), rules()).await;
    let degraded = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let d = degraded.clone();
    a.on_degraded(move |on| {
        if on {
            d.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    assert!(eventually(Duration::from_secs(5), || a.replicas() == 2).await);
    let (local, shared, _held) = count_grants(&a, 3).await;
    assert_eq!((local, shared), (0, 3));

    redis.kill();
    // The first call notices (or the heartbeat does); none hangs.
    let t0 = Instant::now();
    let probe = a.try_acquire("api:x", 1).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(eventually(Duration::from_secs(5), || a.is_degraded()).await);
    assert_eq!(degraded.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Two replicas were seen: each now holds half of 10.
    let (local, shared, _held2) = count_grants(&a, 20).await;
    let probed = usize::from(probe.as_ref().is_ok_and(|g| g.is_local()));
    assert_eq!((local + probed, shared), (5, 0));

    redis.restart();
    assert!(eventually(Duration::from_secs(10), || !a.is_degraded()).await);
    assert!(eventually(Duration::from_secs(10), || !b.is_degraded()).await);
    // A fresh Redis starts with a full bucket, but the upstream has seen
    // what the shares let through: each replica handed back what its
    // share spent (a its 5, b none), so the shared bucket holds what the
    // shares had left, 5, not 10 (issue 34).
    let (local, shared, _held3) = count_grants(&a, 20).await;
    assert_eq!((local, shared), (0, 5));
    assert!(b.try_acquire("api:x", 1).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_with_a_retry_after() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let mut cfg = config(&redis.url(), &prefix(), "a", Mode::Exact);
    cfg.failure = Failure::FailClosed;
    let a = replica(cfg, rules()).await;
    assert!(a.try_acquire("api:x", 1).await.is_ok());
    redis.kill();
    let _ = a.try_acquire("api:x", 1).await;
    assert!(eventually(Duration::from_secs(5), || a.is_degraded()).await);
    let e = a.try_acquire("api:x", 1).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::RateLimited {
                retry_after: Some(_),
                ..
            }
        ),
        "{e}"
    );
    let d = tokio::time::Instant::now() + Duration::from_secs(2);
    let e = a.acquire("api:x", 1, Some(d)).await.unwrap_err();
    assert!(matches!(e, Error::RateLimited { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_costs_one_timeout_then_fails_fast() {
    let Some(redis) = OwnRedis::start() else {
        return;
    };
    let mut cfg = config(&redis.url(), &prefix(), "a", Mode::Exact);
    cfg.timeout = Duration::from_secs(2);
    let a = replica(cfg, rules()).await;
    assert!(a.try_acquire("api:x", 1).await.is_ok());
    redis.signal("-STOP");
    let t0 = Instant::now();
    // Served by the local share once the 2 s timeout has passed.
    let g = a.try_acquire("api:x", 1).await.unwrap();
    let first = t0.elapsed();
    assert!(g.is_local());
    assert!(first < Duration::from_secs(10), "{first:?}");
    let t1 = Instant::now();
    for _ in 0..3 {
        let _ = a.try_acquire("api:x", 1).await;
    }
    println!("first call {first:?}, next three {:?}", t1.elapsed());
    // Fail fast while degraded: three timeouts would be 6 s.
    assert!(t1.elapsed() < Duration::from_secs(3));
    redis.signal("-CONT");
    assert!(eventually(Duration::from_secs(10), || !a.is_degraded()).await);
}

#[tokio::test]
async fn unusable_settings_are_refused_by_name() {
    let mut cfg = sluice_redis::RedisConfig::new("redis://127.0.0.1:1");
    cfg.block_ttl = Duration::ZERO;
    let e = RedisLimiter::connect(cfg, rules(), Default::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("block_ttl"), "{e}");
    let cfg = sluice_redis::RedisConfig::new("http://127.0.0.1:1");
    let e = RedisLimiter::connect(cfg, rules(), Default::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("invalid redis url"), "{e}");
}

/// A line of waiters when Redis goes away, failing open: its head falls
/// to the local share as a lone caller does, and the line is served.
/// Before, the head kept sending the line's reservations to the Redis
/// known to be away, each failing at once and waking it to send the
/// next, and the whole line waited out its deadlines (a replica cut off
/// from Redis served nothing; CI of stop 46).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_of_waiters_falls_to_the_local_share_when_redis_goes() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let p = prefix();
    // One replica: its local share is the whole limit. At 20/s a line of
    // 20 lasts a second, so it is still there when Redis goes.
    let rules = Rules::new().exact("m", Limit::per_second(20).burst(1));
    let a = replica(config(&redis.url(), &p, "a", Mode::Exact), rules).await;
    assert!(eventually(Duration::from_secs(5), || a.replicas() == 1).await);
    let waiters: Vec<_> = (0..20)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move {
                // A guard against a hang, not a timed assertion.
                let guard = tokio::time::Instant::now() + Duration::from_secs(30);
                a.acquire("m", 1, Some(guard)).await.map(|g| g.is_local())
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(5), || !a.is_degraded()).await);
    tokio::time::sleep(Duration::from_millis(150)).await;
    redis.kill();
    let mut local = 0;
    for w in waiters {
        match w.await.unwrap() {
            Ok(is_local) => local += usize::from(is_local),
            Err(e) => panic!("a waiter in line was not served: {e}"),
        }
    }
    assert!(a.is_degraded());
    assert!(local > 0, "the line's tail is served by the local share");
}
