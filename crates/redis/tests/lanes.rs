//! Lanes of a thread's own (`sluice_redis::batch_on_this_thread`): a
//! serving thread's decisions go to Redis from that thread, hold across
//! threads and replicas, batch, follow Redis away and back, and stop with
//! the limiter.

mod common;

use std::future::Future;
use std::time::Duration;

use common::{OwnRedis, config, eventually, prefix, redis_url, replica};
use sluice_limit::{Error, Limit, Rules};
use sluice_redis::{Mode, RedisGrant, RedisLimiter};
use tokio::time::timeout;

fn rules() -> Rules {
    let hour = Duration::from_secs(3600);
    Rules::new()
        .exact("tb", Limit::new(10, hour))
        .exact("if", Limit::in_flight(3))
        .exact("open", Limit::new(1_000_000, hour))
}

/// Runs `work` on a thread of its own as the gateway's serving threads
/// do: lanes of its own, a current-thread runtime.
fn on_a_serving_thread<T: Send + 'static, F: Future<Output = T>>(
    work: impl FnOnce() -> F + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        sluice_redis::batch_on_this_thread();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(work())
    })
}

/// `n` concurrent takes of `resource` on this thread: the grants, and how
/// many were refused for now.
async fn take(l: &RedisLimiter, resource: &'static str, n: usize) -> (Vec<RedisGrant>, usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.try_acquire(resource, 1).await })
        })
        .collect();
    let (mut granted, mut refused) = (Vec::new(), 0);
    for t in tasks {
        match t.await.expect("task") {
            Ok(g) => granted.push(g),
            Err(Error::RateLimited { .. }) => refused += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    (granted, refused)
}

/// A Redis INFO field of `url`'s server, as a number.
async fn info(url: &str, section: &str, field: &str) -> u64 {
    let client = redis::Client::open(url).expect("url");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(&mut c)
        .await
        .expect("info");
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| {
            // commandstats: "calls=N,usec=…"; clients: "N".
            let v = v.strip_prefix("calls=").unwrap_or(v);
            v.split(',')
                .next()
                .unwrap_or("0")
                .trim()
                .parse()
                .unwrap_or(0)
        })
}

/// Script calls the server has run.
async fn script_calls(url: &str) -> u64 {
    info(url, "commandstats", "cmdstat_evalsha").await
        + info(url, "commandstats", "cmdstat_eval").await
}

#[test]
fn serving_threads_decide_in_redis_without_the_limiters_runtime() {
    let Some(url) = redis_url() else {
        return;
    };
    // The runtime the replicas connect on is never driven again: a
    // decision handed over to it would never come back.
    let home = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let p = prefix();
    let (a, b) = home.block_on(async {
        (
            replica(config(&url, &p, "a", Mode::Exact), rules()).await,
            replica(config(&url, &p, "b", Mode::Exact), rules()).await,
        )
    });
    // Two threads, one replica each, 12 takes each of a shared 10.
    let threads: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|l| {
            on_a_serving_thread(move || async move {
                let (granted, refused) = timeout(Duration::from_secs(10), take(&l, "tb", 12))
                    .await
                    .expect("decided on this thread");
                assert!(granted.iter().all(|g| !g.is_local()));
                (granted.len(), refused)
            })
        })
        .collect();
    let (granted, refused) = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .fold((0, 0), |(g, r), (g1, r1)| (g + g1, r + r1));
    assert_eq!((granted, refused), (10, 14));

    // In-flight slots come back through the lane they were taken on, in
    // order: a release sent before a take frees the slot for it.
    let l = a.clone();
    let slots = on_a_serving_thread(move || async move {
        timeout(Duration::from_secs(10), async {
            let (mut held, refused) = take(&l, "if", 3).await;
            assert_eq!((held.len(), refused), (3, 0));
            held.pop();
            let again = l.try_acquire("if", 1).await.expect("the released slot");
            held.push(again);
            let full = l.try_acquire("if", 1).await;
            assert!(matches!(full, Err(Error::RateLimited { .. })), "{full:?}");
            held.len()
        })
        .await
        .expect("decided on this thread")
    });
    assert_eq!(slots.join().expect("thread"), 3);
    drop(home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threads_decisions_share_script_calls() {
    let Some(redis) = OwnRedis::start() else {
        return;
    };
    let url = redis.url();
    let l = replica(config(&url, &prefix(), "a", Mode::Exact), rules()).await;
    let before = script_calls(&url).await;
    let granted = on_a_serving_thread(move || async move {
        let (granted, _) = take(&l, "open", 200).await;
        granted.len()
    })
    .join()
    .expect("thread");
    let calls = script_calls(&url).await - before;
    assert_eq!(granted, 200);
    // One call each would be 200 (the heartbeat adds a few of its own).
    assert!(calls <= 50, "{calls} script calls for 200 decisions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_follows_redis_away_and_back() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let l = replica(config(&redis.url(), &prefix(), "a", Mode::Exact), rules()).await;
    let thread = on_a_serving_thread(move || async move {
        let g = l.try_acquire("tb", 1).await.expect("shared");
        assert!(!g.is_local());
        redis.kill();
        // The lane's call notices; later ones fail fast, on the local share.
        let probe = timeout(Duration::from_secs(5), l.try_acquire("tb", 1))
            .await
            .expect("no hang");
        assert!(probe.is_ok_and(|g| g.is_local()));
        assert!(eventually(Duration::from_secs(5), || l.is_degraded()).await);
        redis.restart();
        // Reconnected on the limiter's runtime; the lane opens a new
        // connection of its own at its next call.
        assert!(eventually(Duration::from_secs(10), || !l.is_degraded()).await);
        let g = l.try_acquire("tb", 1).await.expect("shared again");
        assert!(!g.is_local());
        redis
    });
    let _redis = thread.join().expect("thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_and_its_connection_stop_with_the_limiter() {
    let Some(redis) = OwnRedis::start() else {
        return;
    };
    let url = redis.url();
    // The probe's own connection counts in every figure.
    let clients = || info(&url, "clients", "connected_clients");
    let alone = clients().await;
    let l = replica(config(&url, &prefix(), "a", Mode::Exact), rules()).await;
    let connected = clients().await;
    assert!(connected > alone);
    let (used, used_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = on_a_serving_thread({
        let l = l.clone();
        move || async move {
            let g = l.try_acquire("tb", 1).await.expect("shared");
            assert!(!g.is_local());
            drop((g, l));
            used.send(()).expect("test");
            // This runtime goes on running while the limiter is dropped.
            let _ = stopped.await;
        }
    });
    tokio::task::spawn_blocking(move || used_rx.recv())
        .await
        .expect("join")
        .expect("thread");
    assert_eq!(clients().await, connected + 1, "the lane's own connection");
    drop(l);
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            clients().await == alone
        })
        .await,
        "connections left: {}",
        clients().await - alone
    );
    let _ = stop.send(());
    thread.join().expect("thread");
}

/// [`eventually`] for an async condition.
async fn eventually_async<F: Future<Output = bool>>(within: Duration, f: impl Fn() -> F) -> bool {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f().await
}
