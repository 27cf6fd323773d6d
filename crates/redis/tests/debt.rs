//! No settle leaves a shared resource owing more than one window's
//! capacity, so no key is kept for centuries: a grant that reserved 1 and
//! settles at `u64::MAX` costs everyone one window at most (issue 18: an
//! anonymous release locked a model for every tenant, its key given a TTL
//! of ~10,000 years, surviving restarts).

mod common;

use std::time::Duration;

use common::{config, prefix, redis_url, replica};
use sluice_limit::{Limit, Rules};
use sluice_redis::Mode;

const HOUR: Duration = Duration::from_secs(3600);

fn rules() -> Rules {
    Rules::new()
        .exact("tb", Limit::new(10, HOUR))
        .exact("gcra", Limit::gcra(10, HOUR))
        .exact("sw", Limit::sliding_window(5, HOUR))
        .exact("if", Limit::in_flight(3))
}

async fn pttl(url: &str, key: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap()
}

/// The resource's `available` once it has reached `want` (settles travel
/// in the background), or what it was when polling gave up.
async fn settled(l: &sluice_redis::RedisLimiter, resource: &str, want: f64) -> f64 {
    let mut last = f64::NAN;
    for _ in 0..200 {
        last = l.get_capacity(resource).await.unwrap().available;
        if (last - want).abs() < 1e-6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_settle_owes_one_window_at_most() {
    let Some(url) = redis_url() else {
        return;
    };
    let p = prefix();
    let l = replica(config(&url, &p, "a", Mode::Exact), rules()).await;
    for (resource, floor) in [("tb", -10.0), ("gcra", -10.0), ("sw", -5.0)] {
        let mut g = l.try_acquire(resource, 1).await.unwrap();
        g.settle_part(resource, u64::MAX).unwrap();
        drop(g);
        let available = settled(&l, resource, floor).await;
        assert!(
            (available - floor).abs() < 0.01,
            "{resource}: {available} available, one window of debt is {floor}"
        );
        // The key lives as long as the state differs from a fresh one:
        // the debt repaid, the burst refilled, a window more. Hours, not
        // millennia.
        let ttl = pttl(&url, &format!("{p}{{rl}}:b:{resource}")).await;
        assert!(
            ttl > 0 && ttl <= 3 * 3_600_000 + 2_000,
            "{resource}: PTTL {ttl} ms"
        );
    }
    // In-flight slots are no cost: settling one changes nothing.
    let mut g = l.try_acquire("if", 1).await.unwrap();
    g.settle_part("if", u64::MAX).unwrap();
    let _two = l.try_acquire("if", 2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debt_written_before_the_bound_is_cut_at_the_next_use() {
    let Some(url) = redis_url() else {
        return;
    };
    let p = prefix();
    let key = format!("{p}{{rl}}:b:tb");
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    // What an unbounded settle of 10^12 left behind, TTL included.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("t")
        .arg(-1e12)
        .arg("ts")
        .arg(now_us)
        .query_async(&mut c)
        .await
        .unwrap();
    let _: () = redis::cmd("PEXPIRE")
        .arg(&key)
        .arg(315_360_000_000_000u64)
        .query_async(&mut c)
        .await
        .unwrap();
    let l = replica(config(&url, &p, "a", Mode::Exact), rules()).await;
    let cap = l.get_capacity("tb").await.unwrap();
    assert!(cap.available >= -10.01, "{}", cap.available);
    let ttl = pttl(&url, &key).await;
    assert!(ttl > 0 && ttl <= 3 * 3_600_000 + 2_000, "PTTL {ttl} ms");
}
