//! A line's lease (issue 41): the head of a replica's line of waiters
//! reserves, in one call, a token for each of them, what the shared
//! bucket holds and what comes due before its next call, and hands each
//! out only at its due time; what nobody spends goes back.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{config, prefix, redis_url, replica};
use sluice_limit::{Limit, Rules};
use sluice_redis::{Mode, RedisLimiter};

/// 500/s burst 5: a token every 2 ms, the burst's refill in 10 ms, so a
/// line reserves ahead within a round trip or two.
fn rules() -> Rules {
    Rules::new()
        .exact("m", Limit::per_second(500).burst(5))
        .exact("g", Limit::gcra(500, Duration::from_secs(1)).burst(5))
        .exact("slow", Limit::per_second(1).burst(1_000))
}

/// `waiters` closed-loop waiters on each replica until `total` grants
/// were made between them: when each grant was made.
async fn grants(ls: &[RedisLimiter], waiters: usize, resource: &str, total: u64) -> Vec<Instant> {
    let done = Arc::new(AtomicU64::new(0));
    let at = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for l in ls {
        for _ in 0..waiters {
            let (l, done, at) = (l.clone(), done.clone(), at.clone());
            let resource = resource.to_owned();
            tasks.push(tokio::spawn(async move {
                while done.fetch_add(1, Ordering::SeqCst) < total {
                    // A guard against a hang, not a timed assertion.
                    let guard = tokio::time::Instant::now() + Duration::from_secs(60);
                    let g = l.acquire(&resource, 1, Some(guard)).await.expect("grant");
                    assert!(!g.is_local(), "Redis is up: shared grants only");
                    at.lock().unwrap().push(Instant::now());
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut at = std::mem::take(&mut *at.lock().unwrap());
    at.sort();
    at
}

/// Two replicas whose lines reserve ahead never admit more than the
/// shared bucket allows: in each of three busy periods, each starting
/// after the bucket idled full, the k-th grant comes no earlier than the
/// bucket's rate and burst let k go. (Grants reach their waiters after
/// they are due, never before, so a window from the start of a busy
/// period bounds them whatever the machine's load; tokens handed out
/// before their due time would break it at the first burst.)
async fn never_more_than_the_bucket(mode: Mode, resource: &str) {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = replica(config(&url, &p, "a", mode), rules()).await;
    let b = replica(config(&url, &p, "b", mode), rules()).await;
    for _ in 0..3 {
        // Idle long enough (20 refills of the burst) for the bucket to be
        // full when the busy period starts.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t0 = Instant::now();
        let at = grants(&[a.clone(), b.clone()], 20, resource, 200).await;
        assert_eq!(at.len(), 200);
        for (k, g) in at.iter().enumerate() {
            let allowed = 500.0 * (*g - t0).as_secs_f64() + 5.0;
            assert!(
                (k + 1) as f64 <= allowed + 1e-9,
                "{mode:?} {resource}: grant {} after {:?}, the bucket allows {allowed:.2}",
                k + 1,
                *g - t0
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_lines_never_take_more_than_the_bucket() {
    never_more_than_the_bucket(Mode::Exact, "m").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_gcra_lines_never_take_more_than_the_bucket() {
    never_more_than_the_bucket(Mode::Exact, "g").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_lines_never_take_more_than_the_bucket() {
    never_more_than_the_bucket(Mode::Leased, "m").await;
}

/// The resource's `available` once it has reached `want` (a give-back
/// travels in the background), or what it was when polling gave up.
async fn available(l: &RedisLimiter, resource: &str, want: f64) -> f64 {
    let mut last = f64::NAN;
    for _ in 0..100 {
        last = l.get_capacity(resource).await.unwrap().available;
        if last >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    last
}

/// A line reserves for every waiter queued at the head's cost: a head of
/// cost 10 before 49 waiters of cost 1 takes 500 tokens and the line
/// spends 59. The other 441 go back to the shared bucket when the last
/// waiter leaves, not when they would have refilled (at 1/s, in minutes).
async fn unspent_go_back(mode: Mode) {
    let Some(url) = redis_url() else { return };
    let a = replica(config(&url, &prefix(), "a", mode), rules()).await;
    // Empty the bucket, so that everyone queues.
    let mut all = a.try_acquire("slow", 1_000).await.expect("a full bucket");
    let head = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire("slow", 10, None).await.map(drop) })
    };
    // Let the head queue first (were it not the head, the line would
    // reserve less, and the test prove less, but still pass).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rest: Vec<_> = (0..49)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { a.acquire("slow", 1, None).await.map(drop) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The bucket full again: its release notice wakes the head.
    all.settle(0);
    head.await.unwrap().expect("head");
    for t in rest {
        t.await.unwrap().expect("waiter");
    }
    // 1,000 back, 59 spent, and a few tokens' refill at 1/s.
    let left = available(&a, "slow", 941.0).await;
    assert!((941.0..=950.0).contains(&left), "{mode:?}: {left} left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_reserved_tokens_nobody_spends_go_back() {
    unspent_go_back(Mode::Exact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_reserved_tokens_nobody_spends_go_back() {
    unspent_go_back(Mode::Leased).await;
}
