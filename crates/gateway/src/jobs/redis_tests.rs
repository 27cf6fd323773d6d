//! The workers on limits shared through Redis (the gateway's
//! [`SharedLimiter`] with `[redis]`): two worker pools on two Redis
//! limiters (two replicas) and one job store, and a job's 429. Skipped,
//! with a note, without `SLUICE_TEST_REDIS_URL`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, handler_fn};
use sluice_jobs::{JobState, JobStore, NewJob, SqliteStore, StoreConfig, WorkerPool};
use sluice_limit::{AdaptiveConfig, Limit, Rules, SharedLimiter};
use sluice_redis::{Mode, RedisConfig, RedisLimiter};
use sluice_sim::swarm::most_in_window;
use tokio::sync::watch;

type Starts = Arc<Mutex<Vec<(String, Instant)>>>;

/// How much later than its grant a run may record its start: the
/// windows counted are shorter by this, so that a slow record cannot
/// make a correct limiter look wrong. A bound, not a timing claim.
const RECORD_SLACK: Duration = Duration::from_millis(250);

/// Redis is up throughout these tests. The production timeout (250 ms) is
/// a bound a loaded test machine can miss, and a replica whose Redis call
/// times out limits alone on its share (`fail_open`) while the other still
/// takes from the shared limit: more than the limit in all, as if Redis
/// were away — not what these tests are about.
const REDIS_UP_TIMEOUT: Duration = Duration::from_secs(10);

async fn replica(url: &str, prefix: &str, id: &str) -> RedisLimiter {
    let mut cfg = RedisConfig::new(url);
    cfg.prefix = prefix.to_owned();
    cfg.replica_id = id.to_owned();
    cfg.mode = Mode::Exact;
    cfg.timeout = REDIS_UP_TIMEOUT;
    RedisLimiter::connect(cfg, Rules::new(), AdaptiveConfig::default())
        .await
        .expect("a limiter")
}

/// Which of the two pools have started a job. A pool's runs wait until
/// the other has started one too, so that both take part however slow the
/// machine: the first pool could otherwise claim and run every job before
/// the second one's first claim.
type Started = Arc<watch::Sender<[bool; 2]>>;

/// Pool `n` (0 or 1) of the two.
fn pool(
    store: &Arc<SqliteStore>,
    limiter: RedisLimiter,
    n: usize,
    starts: &Starts,
    started: &Started,
) -> WorkerPool {
    let (starts, started) = (Arc::clone(starts), Arc::clone(started));
    let handlers = Handlers::new().on(
        "work",
        handler_fn(move |job| {
            starts
                .lock()
                .unwrap()
                .push((job.group.clone(), Instant::now()));
            started.send_modify(|s| s[n] = true);
            let mut other = started.subscribe();
            async move {
                let _ = other.wait_for(|s| s[1 - n]).await;
                Outcome::Completed(json!(null))
            }
        }),
    );
    let second = Duration::from_secs(1);
    WorkerPool::builder(Arc::clone(store), Arc::new(limiter) as SharedLimiter)
        .handlers(handlers)
        // Slots for a third of the jobs each: both pools claim, and runs
        // wait in the limiter, so the rate is what binds.
        .queue(
            QueueConfig::new("q")
                .concurrency(10)
                .rate(Limit::sliding_window(6, second))
                .group_rate(Limit::sliding_window(4, second)),
        )
        .configure(|p| {
            p.worker_id = format!("pool-{n}");
            p.poll = Duration::from_millis(10);
        })
        .start()
        .expect("the pool starts")
}

/// The test Redis, or `None` with a note.
fn redis_url() -> Option<String> {
    let url = std::env::var("SLUICE_TEST_REDIS_URL").ok();
    let url = url.filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
    }
    url
}

fn prefix() -> String {
    format!("jobs{:x}:", fastrand::u64(..))
}

/// A job's call answered 429 at one replica pauses the shared bucket for
/// the other replica too, as a proxied call's answer does (429s that keep
/// coming cut it); a reported throttle (the Discord global bucket's) cuts
/// it for every replica at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_a_job_sees_holds_the_bucket_for_every_replica() {
    use sluice_limit::headers::RateLimitHeaders;

    let Some(url) = redis_url() else { return };
    let p = prefix();
    let rules = || {
        Rules::new()
            .exact("api:slack", Limit::per_second(10))
            .exact("api:discord", Limit::per_second(50))
    };
    let connect = |id: &'static str| {
        let (url, p) = (url.clone(), p.clone());
        async move {
            let mut cfg = RedisConfig::new(url);
            cfg.prefix = p;
            cfg.replica_id = id.to_owned();
            RedisLimiter::connect(cfg, rules(), AdaptiveConfig::default())
                .await
                .expect("a limiter")
        }
    };
    let (a, b) = (connect("a").await, connect("b").await);
    let jobs: SharedLimiter = Arc::new(a.clone());
    let grant = jobs.try_acquire_many(&[("api:slack", 1)]).await.unwrap();
    let ok = RateLimitHeaders::default();
    jobs.observe(Some(&grant), Some("api:slack"), None, 200, &ok)
        .await
        .unwrap();
    assert_eq!(b.get_capacity("api:slack").await.unwrap().total, 10);
    let throttled = RateLimitHeaders {
        retry_after: Some(Duration::from_secs(30)),
        ..RateLimitHeaders::default()
    };
    jobs.observe(Some(&grant), Some("api:slack"), None, 429, &throttled)
        .await
        .unwrap();
    let seen = b.get_capacity("api:slack").await.unwrap();
    assert!(seen.paused_for.is_some(), "{seen:?}");
    assert!(matches!(
        b.try_acquire("api:slack", 1).await,
        Err(sluice_limit::Error::RateLimited { .. })
    ));
    jobs.report_throttled("api:slack", None).await.unwrap();
    let seen = b.get_capacity("api:slack").await.unwrap();
    assert_eq!(seen.total, 5, "{seen:?}");
    jobs.report_throttled("api:discord", None).await.unwrap();
    assert_eq!(b.get_capacity("api:discord").await.unwrap().total, 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pools_on_one_redis_share_queue_and_group_rates() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix();
    let store = Arc::new(
        SqliteStore::in_memory(StoreConfig::default())
            .await
            .expect("a store"),
    );
    for n in 0..30 {
        let group = if n % 2 == 0 { "even" } else { "odd" };
        let job = NewJob::new("q", "work", json!({ "n": n })).group(group);
        store.enqueue(job).await.expect("enqueue");
    }
    let starts: Starts = Arc::default();
    let started: Started = Arc::new(watch::channel([false; 2]).0);
    let (la, lb) = (
        replica(&url, &prefix, "a").await,
        replica(&url, &prefix, "b").await,
    );
    let a = pool(&store, la, 0, &starts, &started);
    let b = pool(&store, lb, 1, &starts, &started);
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let counts = store.counts().await.expect("counts");
        let done = counts
            .iter()
            .find(|q| q.queue == "q")
            .map_or(0, |q| q.counts.get(JobState::Completed));
        if done == 30 {
            break;
        }
        assert!(Instant::now() < give_up, "only {done} of 30 completed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ra, rb) = (
        a.shutdown(Duration::from_secs(5)).await,
        b.shutdown(Duration::from_secs(5)).await,
    );
    assert_eq!(ra.completed + rb.completed, 30);
    assert!(
        ra.completed > 0 && rb.completed > 0,
        "both replicas ran jobs: {ra:?} {rb:?}"
    );
    let mut starts = starts.lock().unwrap().clone();
    starts.sort_by_key(|(_, t)| *t);
    let all: Vec<Instant> = starts.iter().map(|(_, t)| *t).collect();
    let window = Duration::from_secs(1) - RECORD_SLACK;
    // Per replica 6/s would let 12 through; shared, 6 in all.
    assert!(
        most_in_window(&all, window) <= 6,
        "queue rate exceeded: {} starts within {window:?}",
        most_in_window(&all, window)
    );
    for group in ["even", "odd"] {
        let times: Vec<Instant> = starts
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(times.len(), 15);
        assert!(
            most_in_window(&times, window) <= 4,
            "group {group} rate exceeded"
        );
    }
    // 30 starts, at most 6 in any second, span at least 4 s.
    assert!(
        all[29] - all[0] >= Duration::from_secs(4) - RECORD_SLACK,
        "30 starts in {:?}",
        all[29] - all[0]
    );
}
