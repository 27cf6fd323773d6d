//! Fair shares between replicas: replicas contending for one shared bucket
//! get its refill in proportion to their weights (their waiting tenants),
//! not by who asks first or who has more waiters; a share one replica does
//! not use goes to the others. Shares are counted over grants, never timed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{config, connection, ops_on_bucket, prefix, redis_url, replica};
use sluice_limit::{Limit, Rules};
use sluice_redis::{Mode, RedisLimiter};

/// 400/s, burst 10: a few hundred grants take about a second.
fn rules() -> Rules {
    Rules::new()
        .exact("m", Limit::per_second(400).burst(10))
        .exact("g", Limit::gcra(400, Duration::from_secs(1)).burst(10))
}

async fn two(mode: Mode) -> Option<(RedisLimiter, RedisLimiter)> {
    let url = redis_url()?;
    let p = prefix();
    let a = replica(config(&url, &p, "a", mode), rules()).await;
    let b = replica(config(&url, &p, "b", mode), rules()).await;
    Some((a, b))
}

/// One contending test at a time in this binary (each takes it before its
/// replicas first ask): several at once on two cores starve some replicas
/// of the scheduler long enough to drop out of the shares they are owed,
/// which is the machine's doing, not the script's.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `waiters[i]` closed-loop waiters on replica `i` take from `resource`
/// one at a time until `total` grants were made between them; what each
/// replica got.
async fn contend(
    replicas: &[RedisLimiter],
    waiters: &[usize],
    resource: &str,
    total: u64,
) -> Vec<u64> {
    let done = Arc::new(AtomicU64::new(0));
    let got: Vec<Arc<AtomicU64>> = replicas.iter().map(|_| Arc::default()).collect();
    let mut tasks = Vec::new();
    for (i, l) in replicas.iter().enumerate() {
        for _ in 0..waiters[i] {
            let (l, done, mine) = (l.clone(), done.clone(), got[i].clone());
            let resource = resource.to_owned();
            tasks.push(tokio::spawn(async move {
                while done.load(Ordering::SeqCst) < total {
                    // A guard against a hang, not a timed assertion.
                    let guard = tokio::time::Instant::now() + Duration::from_secs(60);
                    let g = l.acquire(&resource, 1, Some(guard)).await.expect("grant");
                    assert!(!g.is_local(), "Redis is up: shared grants only");
                    mine.fetch_add(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    got.iter().map(|g| g.load(Ordering::SeqCst)).collect()
}

fn share(got: &[u64], i: usize) -> f64 {
    got[i] as f64 / got.iter().sum::<u64>() as f64
}

/// Equal weights, unequal pressure: one replica has twenty waiters and
/// takes tokens for all its line in one call, the other has two; they
/// still get half each.
async fn equal_weights_share_equally(mode: Mode, resource: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((a, b)) = two(mode).await else {
        return;
    };
    let got = contend(&[a, b], &[20, 2], resource, 600).await;
    let s = share(&got, 0);
    assert!((0.4..=0.6).contains(&s), "{mode:?} {resource}: {got:?}");
}

/// Weights 1 and 3 (a replica with three tenants waiting against one
/// with one): a quarter and three quarters.
async fn weights_set_the_shares(mode: Mode, resource: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((a, b)) = two(mode).await else {
        return;
    };
    a.weigh_by(|_| 1);
    b.weigh_by(|_| 3);
    let got = contend(&[a, b], &[8, 8], resource, 800).await;
    let s = share(&got, 1);
    assert!((0.65..=0.85).contains(&s), "{mode:?} {resource}: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_equal_weights_share_equally() {
    equal_weights_share_equally(Mode::Exact, "m").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_gcra_equal_weights_share_equally() {
    equal_weights_share_equally(Mode::Exact, "g").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_equal_weights_share_equally() {
    equal_weights_share_equally(Mode::Leased, "m").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_weights_set_the_shares() {
    weights_set_the_shares(Mode::Exact, "m").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_weights_set_the_shares() {
    weights_set_the_shares(Mode::Leased, "m").await;
}

/// Three replicas, weights 2, 1 and 1 (four tenants split over them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_by_weight() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(url) = redis_url() else {
        return;
    };
    let p = prefix();
    let mut rs = Vec::new();
    for (id, w) in [("a", 2), ("b", 1), ("c", 1)] {
        let l = replica(config(&url, &p, id, Mode::Exact), rules()).await;
        l.weigh_by(move |_| w);
        rs.push(l);
    }
    let got = contend(&rs, &[4, 12, 4], "m", 800).await;
    assert!((0.4..=0.6).contains(&share(&got, 0)), "{got:?}");
    assert!((0.17..=0.33).contains(&share(&got, 1)), "{got:?}");
    assert!((0.17..=0.33).contains(&share(&got, 2)), "{got:?}");
}

/// A replica that asked once and went quiet holds nobody up: the other
/// takes the whole rate (its owed share is kept only until it stops
/// counting), in exact and leased mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_replica_holds_nobody_up() {
    let _one = ONE_AT_A_TIME.lock().await;
    for mode in [Mode::Exact, Mode::Leased] {
        let Some((a, b)) = two(mode).await else {
            return;
        };
        b.weigh_by(|_| 100);
        drop(b.acquire("m", 1, None).await.unwrap());
        let got = contend(&[a, b], &[4, 0], "m", 400).await;
        assert!(got[0] >= 400 && got[1] == 0, "{mode:?}: {got:?}");
    }
}

/// One `L` (lease) of replica `a` for `need` tokens on a token bucket of
/// 1/s burst 10 (no margin) set up through the script's own keys: the
/// bucket holds `tokens`; replica `b` (equal weight) is owed `b_owed`, and
/// `a` owes one (it took more than its share), both counted for ten
/// seconds more. The reply: taken, wait (us), kind.
async fn lease_with_b_owed(tokens: f64, b_owed: f64, need: u32) -> Option<(i64, i64, i64)> {
    let mut c = connection().await?;
    let p = prefix();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await.expect("time");
    let now = secs * 1_000_000 + micros;
    let _: () = redis::cmd("HSET")
        .arg(format!("{p}s"))
        .arg("t")
        .arg(tokens)
        .arg("ts")
        .arg(now)
        .query_async(&mut c)
        .await
        .expect("bucket");
    let _: () = redis::cmd("HSET")
        .arg(format!("{p}f"))
        .arg("ts")
        .arg(now)
        .arg("b")
        .arg(format!("1,{b_owed},{}", now + 10_000_000))
        .arg("a")
        .arg(format!("1,-1,{}", now + 10_000_000))
        .query_async(&mut c)
        .await
        .expect("shares");
    // L idx want min weight line ahead_us, on a bucket of burst 10 with
    // no margin.
    let need = need.to_string();
    let ops = ["L", "1", &need, &need, "1", "1", "0"];
    let ops: Vec<String> = ops.iter().map(|s| (*s).to_owned()).collect();
    let reply = ops_on_bucket(&mut c, &p, 10, 0, &ops).await;
    Some((reply[0], reply[1], reply[3]))
}

/// A replica refused for another's share is told to come back when its
/// tokens are there, not later: once the other is owed all it can be
/// (half the burst here), the rest of the refill is unowed and comes at
/// the whole rate, not at this replica's half; and never after the bucket
/// would fill, when a refill nobody takes is lost to both (a pool's
/// replica whose calls went to the other deployment stays counted, and
/// owed, for a while). Waits are what the script computes from the state
/// set (1/s: the few ms between setting it and the call move it by
/// thousandths), not times measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_for_another_replicas_share_waits_no_longer_than_its_tokens_take() {
    // `b` owed 5 (its cap), 5.5 held: one more whole token unowed at
    // 6, 0.5 s away at 1/s (2 s at this replica's half of the rate).
    let Some((taken, wait, kind)) = lease_with_b_owed(5.5, 5.0, 1).await else {
        return;
    };
    assert_eq!((taken, kind), (0, 3), "refused for b's share");
    assert!(
        (450_000..=510_000).contains(&wait),
        "told to wait {wait} us"
    );
    // `b` owed 4 (under its cap), 9.5 held, 6 wanted: 5 unowed, and
    // its half of the refill would take 2 s for one more, but the
    // bucket is full in 0.5 s.
    let (taken, wait, kind) = lease_with_b_owed(9.5, 4.0, 6).await.unwrap();
    assert_eq!((taken, kind), (0, 3), "refused for b's share");
    assert!(
        (450_000..=510_000).contains(&wait),
        "told to wait {wait} us"
    );
}
