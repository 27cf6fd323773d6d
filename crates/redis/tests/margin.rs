//! The jitter margin in the shared scripts (issue 41): a take that finds
//! the shared bucket full holds back refill for the margin, once per busy
//! period and never per grant, as the in-process limiter does.

mod common;

use std::time::Duration;

use common::{config, connection, ops_on_bucket, prefix, redis_url};
use sluice_limit::{AdaptiveConfig, Error, Limit, Rules};
use sluice_redis::{Mode, RedisLimiter};

// 1/s with a burst of 10: refill during a test is a fraction of a token
// unless the machine stalls for most of a second.
fn rules() -> Rules {
    Rules::new()
        .exact("tb", Limit::per_second(1).burst(10))
        .exact("gcra", Limit::gcra(1, Duration::from_secs(1)).burst(10))
}

async fn two(margin: Duration) -> Option<(RedisLimiter, RedisLimiter)> {
    let url = redis_url()?;
    let p = prefix();
    let adaptive = AdaptiveConfig {
        jitter_margin: margin,
        ..AdaptiveConfig::default()
    };
    let mut out = Vec::new();
    for id in ["a", "b"] {
        let l = RedisLimiter::connect(config(&url, &p, id, Mode::Exact), rules(), adaptive)
            .await
            .expect("limiter");
        out.push(l);
    }
    let b = out.pop()?;
    Some((out.pop()?, b))
}

/// Takes one at a time from `resource` on `a` until one is refused (one
/// replica: with two, fair shares may refuse first); then `b` is refused
/// too. How many went, and the refusal's wait.
async fn drain(a: &RedisLimiter, b: &RedisLimiter, resource: &str) -> (usize, Duration) {
    let mut held = Vec::new();
    for _ in 0..20 {
        match a.try_acquire(resource, 1).await {
            Ok(g) => {
                assert!(!g.is_local());
                held.push(g);
            }
            Err(Error::RateLimited { retry_after, .. }) => {
                let other = b.try_acquire(resource, 1).await;
                assert!(matches!(other, Err(Error::RateLimited { .. })), "{other:?}");
                return (held.len(), retry_after.expect("a wait"));
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    panic!("20 went from a burst of 10");
}

async fn held_once(resource: &str) {
    // A margin of one token's refill, found full (idle since ever): nine
    // go, not ten, and not one (it is held once, not per grant) …
    let Some((a, b)) = two(Duration::from_secs(1)).await else {
        return;
    };
    let (went, wait) = drain(&a, &b, resource).await;
    assert_eq!(went, 9, "{resource}");
    // … and the tenth waits the refill of the token held back.
    assert!(
        wait > Duration::from_millis(500) && wait <= Duration::from_secs(1),
        "{resource}: {wait:?}"
    );
    // Without a margin the whole burst goes.
    let Some((a, b)) = two(Duration::ZERO).await else {
        return;
    };
    let (went, _) = drain(&a, &b, resource).await;
    assert_eq!(went, 10, "{resource}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_holds_the_margin_once_when_found_full() {
    held_once("tb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcra_holds_the_margin_once_when_found_full() {
    held_once("gcra").await;
}

/// Where the burst has no room for the margin, it is taken from time: a
/// full bucket lets its grant go, and the next waits the margin out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_margin_larger_than_the_burst_is_taken_from_time() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let adaptive = AdaptiveConfig {
        jitter_margin: Duration::from_millis(1_500),
        max_jitter_margin: Duration::from_secs(2),
        ..AdaptiveConfig::default()
    };
    let rules = Rules::new().exact("one", Limit::per_second(1).burst(1));
    let l = RedisLimiter::connect(config(&url, &p, "a", Mode::Exact), rules, adaptive)
        .await
        .expect("limiter");
    let g = l
        .try_acquire("one", 1)
        .await
        .expect("a full bucket lets go");
    drop(g);
    match l.try_acquire("one", 1).await {
        // The refill of one window, capped: the margin's share of it.
        Err(Error::RateLimited { retry_after, .. }) => {
            let w = retry_after.expect("a wait");
            assert!(
                w > Duration::from_millis(1_500) && w <= Duration::from_secs(2),
                "{w:?}"
            );
        }
        other => panic!("expected a wait, got {other:?}"),
    }
}

/// One `L` (lease) operation for the whole burst on a fresh (full) token
/// bucket of 1/s and `burst` through the script itself, with a margin of
/// one token's refill, then an `I` (info): what it took and what the
/// bucket holds after (the margin, taken from time, is a debt). `line`
/// says the take is for waiters already queued.
async fn lease_on_full(line: bool, burst: u32) -> Option<(i64, i64)> {
    let mut c = connection().await?;
    let p = prefix();
    // L idx want min weight line ahead_us, then I idx.
    let ops = [
        "L",
        "1",
        &burst.to_string(),
        "1",
        "1",
        &u8::from(line).to_string(),
        "0",
        "I",
        "1",
    ];
    let ops: Vec<String> = ops.iter().map(|s| (*s).to_owned()).collect();
    let reply = ops_on_bucket(&mut c, &p, burst, 1_000_000, &ops).await;
    Some((reply[0], reply[4]))
}

/// A lease for a line of waiters that finds the bucket full holds no
/// margin where the margin costs more than half the burst: the waiters
/// queued while it filled (their replica came late), so their busy period
/// goes on. Any other take found full holds it, and so does a line's
/// where it fits the burst (the upstream, behind by the network's delay,
/// may not have filled yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_waited_while_the_bucket_filled_holds_no_margin_again() {
    let Some(alone) = lease_on_full(false, 1).await else {
        return;
    };
    assert_eq!(
        alone,
        (1, -1),
        "a take that starts a busy period holds the margin"
    );
    // One token of margin against a burst of 1: not held for a line.
    assert_eq!(lease_on_full(true, 1).await, Some((1, 0)));
    // Against a burst of 10 it is, line or not.
    assert_eq!(lease_on_full(false, 10).await, Some((10, -1)));
    assert_eq!(lease_on_full(true, 10).await, Some((10, -1)));
}

/// A 429 that a timing collision explains (OpenAI-style headers: a bucket
/// that refills continuously, a Retry-After of a few milliseconds).
fn collision() -> sluice_limit::headers::RateLimitHeaders {
    sluice_limit::headers::RateLimitHeaders::parse(
        [
            ("x-ratelimit-limit-requests", "10"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "10s"),
            ("retry-after-ms", "5"),
        ],
        std::time::SystemTime::now(),
    )
}

/// Collisions widen the margin this replica's own limiter holds, and the
/// shared scripts hold the widened one too (as the in-process limiter
/// does): with no margin configured the whole burst goes; after ten
/// collisions (10 ms doubled nine times: 5.12 s, at 1/s five tokens) a take
/// that finds the bucket full holds about five back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collisions_widen_the_margin_the_scripts_hold() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let adaptive = AdaptiveConfig {
        jitter_margin: Duration::ZERO,
        max_jitter_margin: Duration::from_secs(10),
        ..AdaptiveConfig::default()
    };
    // 1/s counted over 10 s: a margin of up to 10 s fits its window.
    let rules = Rules::new().prefix("slow-", Limit::new(10, Duration::from_secs(10)).burst(10));
    let mut l = Vec::new();
    for id in ["a", "b"] {
        l.push(
            RedisLimiter::connect(config(&url, &p, id, Mode::Exact), rules.clone(), adaptive)
                .await
                .expect("limiter"),
        );
    }
    let (a, b) = (&l[0], &l[1]);
    let (went, _) = drain(a, b, "slow-calm").await;
    assert_eq!(went, 10, "no margin configured, no collision");
    for _ in 0..10 {
        a.observe(Some("slow-collided"), None, 429, &collision())
            .await
            .expect("observe");
    }
    // The collisions' pauses (5 ms) are over.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (went, _) = drain(a, b, "slow-collided").await;
    assert!(
        (3..=6).contains(&went),
        "{went} went: the widened margin is held on the shared bucket"
    );
}

/// A Retry-After pause (an upstream's 429) found the upstream empty:
/// nothing refills in the shared bucket before it ends, for a token bucket
/// and GCRA alike, and the burst goes back to filling from there. At 10/s
/// burst 10, after a pause of 1 s, a bucket that kept refilling through
/// it would let its whole burst go at once (the replica that counted ahead
/// of the upstream colliding again and again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_empties_the_shared_bucket_until_it_ends() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let adaptive = AdaptiveConfig {
        jitter_margin: Duration::ZERO,
        ..AdaptiveConfig::default()
    };
    let rules = Rules::new()
        .exact("tb10", Limit::per_second(10).burst(10))
        .exact("gcra10", Limit::gcra(10, Duration::from_secs(1)).burst(10));
    let a = RedisLimiter::connect(config(&url, &p, "a", Mode::Exact), rules, adaptive)
        .await
        .expect("limiter");
    for resource in ["tb10", "gcra10"] {
        let g = a.try_acquire(resource, 1).await.expect("a full bucket");
        drop(g);
        a.report_throttled(resource, Some(Duration::from_secs(1)))
            .await
            .expect("throttled");
        // Refused through the pause, with the pause's wait.
        match a.try_acquire(resource, 1).await {
            Err(Error::RateLimited { retry_after, .. }) => {
                assert!(retry_after.expect("a wait") > Duration::from_millis(500));
            }
            other => panic!("{resource}: expected the pause, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1_050)).await;
        let mut went = 0;
        while went < 20 && a.try_acquire(resource, 1).await.is_ok() {
            went += 1;
        }
        assert!(
            went <= 3,
            "{resource}: {went} went just after the pause (nine or ten if it refilled through it)"
        );
    }
}
