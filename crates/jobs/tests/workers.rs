//! The worker pool against a real SQLite store (and one test on
//! PostgreSQL when `SLUICE_TEST_POSTGRES_URL` is set).

mod common;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::remote::Remote;
use common::{Limit, count, eventually, fast, limiter, sqlite};
use serde_json::json;
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
use sluice_jobs::{JobId, JobState, JobStore, NewJob};
use sluice_sim::swarm::most_in_window;

/// A pool on `store` working `queue` with `handlers` and fast timings.
fn pool<S: JobStore + 'static>(
    store: &Arc<S>,
    queue: QueueConfig,
    handlers: Handlers,
) -> WorkerPool {
    WorkerPool::builder(Arc::clone(store), limiter())
        .handlers(handlers)
        .queue(queue)
        .configure(fast)
        .start()
        .expect("start the pool")
}

async fn enqueue(store: &impl JobStore, job: NewJob) -> JobId {
    store.enqueue(job).await.expect("enqueue").job.id
}

async fn get(store: &impl JobStore, id: JobId) -> sluice_jobs::Job {
    store.get(id).await.expect("get").expect("the job exists")
}

async fn wait_state(store: &impl JobStore, id: JobId, state: JobState) -> sluice_jobs::Job {
    eventually(&format!("job {id} to be {state}"), || async {
        get(store, id).await.state == state
    })
    .await;
    get(store, id).await
}

fn echo() -> Handlers {
    Handlers::new().on(
        "echo",
        handler_fn(|job| async move { Outcome::Completed(job.payload) }),
    )
}

#[tokio::test]
async fn jobs_complete_with_their_results() {
    let store = Arc::new(sqlite().await);
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(enqueue(&*store, NewJob::new("q", "echo", json!({"n": n}))).await);
    }
    let pool = pool(&store, QueueConfig::new("q").unlimited(), echo());
    for (n, id) in ids.into_iter().enumerate() {
        let job = wait_state(&*store, id, JobState::Completed).await;
        assert_eq!(job.result, Some(json!({"n": n})));
        assert_eq!(job.attempts, 1);
    }
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        (report.completed, report.failed, report.released),
        (10, 0, 0)
    );
}

#[tokio::test]
async fn a_failed_run_is_retried_then_succeeds() {
    let store = Arc::new(sqlite().await);
    let handlers = Handlers::new().on(
        "flaky",
        handler_fn(|job| async move {
            if job.attempts == 0 {
                Outcome::retry("503 from upstream")
            } else {
                Outcome::Completed(json!("ok"))
            }
        }),
    );
    let id = enqueue(&*store, NewJob::new("q", "flaky", json!({}))).await;
    let pool = pool(&store, QueueConfig::new("q"), handlers);
    let job = wait_state(&*store, id, JobState::Completed).await;
    assert_eq!(job.attempts, 2);
    assert_eq!(job.last_error.as_deref(), Some("503 from upstream"));
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!((report.completed, report.failed, report.dead), (1, 1, 0));
}

#[tokio::test]
async fn a_job_goes_dead_after_max_attempts_and_fatal_at_once() {
    let store = Arc::new(sqlite().await);
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let handlers = Handlers::new()
        .on(
            "always_fails",
            handler_fn(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Outcome::retry("boom") }
            }),
        )
        .on(
            "bad_request",
            handler_fn(|_| async { Outcome::fatal("400: invalid role name") }),
        );
    let failing = enqueue(
        &*store,
        NewJob::new("q", "always_fails", json!({})).max_attempts(3),
    )
    .await;
    let fatal = enqueue(
        &*store,
        NewJob::new("q", "bad_request", json!({})).max_attempts(5),
    )
    .await;
    let pool = pool(&store, QueueConfig::new("q").unlimited(), handlers);
    let job = wait_state(&*store, failing, JobState::Dead).await;
    assert_eq!((job.attempts, job.last_error.as_deref()), (3, Some("boom")));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let job = wait_state(&*store, fatal, JobState::Dead).await;
    assert_eq!(job.attempts, 1, "a fatal error uses one attempt of five");
    assert_eq!(job.last_error.as_deref(), Some("400: invalid role name"));
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.dead, 2);
}

#[tokio::test]
async fn a_throttle_uses_no_attempt_until_its_bound() {
    let store = Arc::new(sqlite().await);
    let handlers = Handlers::new()
        .on(
            "throttled_twice",
            handler_fn(|job| async move {
                if job.reschedules < 2 {
                    Outcome::Throttled {
                        error: "429".into(),
                        retry_after: Some(Duration::from_millis(5)),
                    }
                } else {
                    Outcome::Completed(json!("ok"))
                }
            }),
        )
        .on(
            "always_throttled",
            handler_fn(|_| async {
                Outcome::Throttled {
                    error: "429".into(),
                    retry_after: Some(Duration::from_millis(5)),
                }
            }),
        );
    let twice = enqueue(&*store, NewJob::new("q", "throttled_twice", json!({}))).await;
    let forever = enqueue(
        &*store,
        NewJob::new("q", "always_throttled", json!({})).max_attempts(2),
    )
    .await;
    let pool = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q").unlimited())
        .configure(|c| {
            fast(c);
            c.max_throttles = 2;
        })
        .start()
        .unwrap();
    let job = wait_state(&*store, twice, JobState::Completed).await;
    assert_eq!((job.attempts, job.reschedules), (1, 2));
    // Two free throttles per attempt, then the third uses the attempt.
    let job = wait_state(&*store, forever, JobState::Dead).await;
    assert_eq!((job.attempts, job.reschedules), (2, 4));
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_panicking_handler_is_a_retryable_failure() {
    let store = Arc::new(sqlite().await);
    let handlers = Handlers::new()
        .on(
            "panics_once",
            handler_fn(|job| async move {
                assert!(job.attempts > 0, "first run panics");
                Outcome::Completed(json!("ok"))
            }),
        )
        .on(
            "always_panics",
            handler_fn(|_| async { panic!("handler bug") }),
        );
    let once = enqueue(&*store, NewJob::new("q", "panics_once", json!({}))).await;
    let always = enqueue(
        &*store,
        NewJob::new("q", "always_panics", json!({})).max_attempts(2),
    )
    .await;
    let pool = pool(&store, QueueConfig::new("q").unlimited(), handlers);
    let job = wait_state(&*store, once, JobState::Completed).await;
    assert_eq!(job.attempts, 2);
    let job = wait_state(&*store, always, JobState::Dead).await;
    assert_eq!(job.attempts, 2);
    let error = job.last_error.unwrap_or_default();
    assert!(error.contains("handler panicked: handler bug"), "{error}");
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_job_of_an_unknown_kind_goes_dead_saying_so() {
    let store = Arc::new(sqlite().await);
    let id = enqueue(&*store, NewJob::new("q", "smtp.send", json!({}))).await;
    let pool = pool(&store, QueueConfig::new("q"), echo());
    let job = wait_state(&*store, id, JobState::Dead).await;
    let error = job.last_error.unwrap_or_default();
    assert!(
        error.contains("no handler for kind \"smtp.send\""),
        "{error}"
    );
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn concurrency_is_never_exceeded() {
    let store = Arc::new(sqlite().await);
    let now = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let (n, m) = (Arc::clone(&now), Arc::clone(&max));
    let handlers = Handlers::new().on(
        "work",
        handler_fn(move |_| {
            let (now, max) = (Arc::clone(&n), Arc::clone(&m));
            async move {
                let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(inside, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Outcome::Completed(json!(null))
            }
        }),
    );
    for _ in 0..30 {
        enqueue(&*store, NewJob::new("q", "work", json!({}))).await;
    }
    let pool = pool(
        &store,
        QueueConfig::new("q").unlimited().concurrency(3),
        handlers,
    );
    eventually("30 completed", || async {
        count(&*store, "q", JobState::Completed).await == 30
    })
    .await;
    assert_eq!(
        max.load(Ordering::SeqCst),
        3,
        "3 slots, all used, never more"
    );
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn jobs_claimed_ahead_wait_for_a_slot_and_go_back_at_shutdown() {
    let store = Arc::new(sqlite().await);
    let started = Arc::new(AtomicU32::new(0));
    // Each run waits for a permit of the gate: the test lets them end.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (s, g) = (Arc::clone(&started), Arc::clone(&gate));
    let handlers = Handlers::new().on(
        "gated",
        handler_fn(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            let gate = Arc::clone(&g);
            async move {
                gate.acquire().await.expect("the gate stays open").forget();
                Outcome::Completed(json!(null))
            }
        }),
    );
    for _ in 0..5 {
        enqueue(&*store, NewJob::new("q", "gated", json!({}))).await;
    }
    let queue = QueueConfig::new("q").unlimited().concurrency(1).prefetch(2);
    let pool = pool(&store, queue, handlers);
    // One runs, two more are leased ahead of a slot; none beyond that.
    eventually("one running, two claimed ahead", || async {
        count(&*store, "q", JobState::Running).await == 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(started.load(Ordering::SeqCst), 1, "one slot");
    assert_eq!(count(&*store, "q", JobState::Available).await, 2);

    // The run ends: a job claimed ahead takes its slot, and the claim
    // tops up what waits.
    gate.add_permits(1);
    eventually("the next one started", || async {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    eventually("claimed ahead again", || async {
        count(&*store, "q", JobState::Running).await == 3
            && count(&*store, "q", JobState::Completed).await == 1
    })
    .await;
    assert_eq!(started.load(Ordering::SeqCst), 2);

    // The run that never ends is halted at the deadline; the two that
    // never started go back at once. No attempt is used by any.
    let report = pool.shutdown(Duration::from_millis(200)).await;
    assert_eq!((report.completed, report.released), (1, 3));
    assert_eq!(count(&*store, "q", JobState::Scheduled).await, 3);
    assert_eq!(count(&*store, "q", JobState::Available).await, 1);
    let jobs = store
        .list(&sluice_jobs::ListFilter {
            state: Some(JobState::Scheduled),
            ..sluice_jobs::ListFilter::default()
        })
        .await
        .expect("list");
    assert!(
        jobs.jobs
            .iter()
            .all(|j| j.attempts == 0 && j.lease.is_none())
    );
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "none started at shutdown"
    );
}

#[tokio::test]
async fn a_paused_queue_is_not_claimed_until_resumed() {
    let store = Arc::new(sqlite().await);
    store.pause("q").await.unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let handlers = Handlers::new().on(
        "work",
        handler_fn(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Outcome::Completed(json!(null)) }
        }),
    );
    for _ in 0..5 {
        enqueue(&*store, NewJob::new("q", "work", json!({}))).await;
    }
    let pool = pool(&store, QueueConfig::new("q"), handlers);
    // Many claim polls go by while paused (10 ms apart): none takes a job.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(count(&*store, "q", JobState::Available).await, 5);
    store.resume("q").await.unwrap();
    eventually("5 completed", || async {
        count(&*store, "q", JobState::Completed).await == 5
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn shutdown_finishes_what_it_can_and_gives_back_the_rest() {
    let store = Arc::new(sqlite().await);
    let started = Arc::new(AtomicU32::new(0));
    let s1 = Arc::clone(&started);
    let s2 = Arc::clone(&started);
    let handlers = Handlers::new()
        .on(
            "quick_enough",
            handler_fn(move |_| {
                s1.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Outcome::Completed(json!("finished during shutdown"))
                }
            }),
        )
        .on(
            "never_ends",
            handler_fn(move |_| {
                s2.fetch_add(1, Ordering::SeqCst);
                std::future::pending()
            }),
        );
    let quick = enqueue(&*store, NewJob::new("q", "quick_enough", json!({}))).await;
    let stuck = enqueue(&*store, NewJob::new("q", "never_ends", json!({}))).await;
    let pool = pool(&store, QueueConfig::new("q").unlimited(), handlers);
    eventually("both started", || async {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    // Generous: the quick job needs 50 ms; the other never ends anyway.
    let report = pool.shutdown(Duration::from_secs(3)).await;
    assert_eq!((report.completed, report.released), (1, 1));
    assert_eq!(get(&*store, quick).await.state, JobState::Completed);
    let job = get(&*store, stuck).await;
    assert_eq!(job.state, JobState::Scheduled, "given back to run again");
    assert_eq!(job.attempts, 0, "giving back uses no attempt");
    assert!(job.lease.is_none());
}

#[tokio::test]
async fn a_crashed_workers_job_is_rescued_after_its_lease_expires() {
    // A file, not the in-memory store: the crash below drops a pool that
    // may be in the middle of a statement, and the connection it held is
    // then closed; an in-memory database would go with it.
    let dir = std::env::temp_dir().join(format!(
        "sluice-rescue-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(
        sluice_jobs::SqliteStore::open(dir.join("jobs.db"), sluice_jobs::StoreConfig::default())
            .await
            .expect("open a store"),
    );
    let started = Arc::new(AtomicU32::new(0));
    let s = Arc::clone(&started);
    let hangs = Handlers::new().on(
        "work",
        handler_fn(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            std::future::pending()
        }),
    );
    let id = enqueue(&*store, NewJob::new("q", "work", json!({}))).await;
    let crashing = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(hangs)
        .queue(QueueConfig::new("q"))
        .configure(|c| {
            fast(c);
            c.lease = Duration::from_millis(300);
            c.heartbeat = Duration::from_millis(100);
            c.rescue_every = None;
        })
        .start()
        .unwrap();
    eventually("the job to start", || async {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    drop(crashing); // a crash: no shutdown, the lease is still held
    assert_eq!(get(&*store, id).await.state, JobState::Running);

    let handlers = Handlers::new().on(
        "work",
        handler_fn(|_| async { Outcome::Completed(json!("second worker")) }),
    );
    let rescuer = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q"))
        .configure(|c| {
            fast(c);
            c.rescue_every = Some(Duration::from_millis(50));
        })
        .start()
        .unwrap();
    let job = wait_state(&*store, id, JobState::Completed).await;
    assert_eq!(job.attempts, 2, "the lost run counts as an attempt");
    assert_eq!(job.result, Some(json!("second worker")));
    assert_eq!(started.load(Ordering::SeqCst), 1);
    rescuer.shutdown(Duration::from_secs(5)).await;
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Jobs that run for several leases stay theirs: the pool's heartbeat
/// renews every running job's lease, so the rescuer (every 20 ms) takes
/// none back; a running job that is cancelled loses its lease at the next
/// heartbeat, and its run stops without recording anything.
#[tokio::test]
async fn heartbeats_keep_long_runs_and_stop_cancelled_ones() {
    let store = Arc::new(sqlite().await);
    let started = Arc::new(AtomicU32::new(0));
    let s = Arc::clone(&started);
    let handlers = Handlers::new()
        .on(
            "long",
            handler_fn(move |_| {
                s.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_millis(1_000)).await;
                    Outcome::Completed(json!("done"))
                }
            }),
        )
        .on("hang", handler_fn(|_| std::future::pending()));
    let mut long = Vec::new();
    for _ in 0..5 {
        long.push(enqueue(&*store, NewJob::new("q", "long", json!({}))).await);
    }
    let hung = enqueue(&*store, NewJob::new("q", "hang", json!({}))).await;
    let pool = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q").unlimited())
        .configure(|c| {
            fast(c);
            c.lease = Duration::from_millis(200);
            c.heartbeat = Duration::from_millis(50);
            c.rescue_every = Some(Duration::from_millis(20));
        })
        .start()
        .unwrap();
    wait_state(&*store, hung, JobState::Running).await;
    store.cancel(hung).await.unwrap();
    for id in &long {
        let job = wait_state(&*store, *id, JobState::Completed).await;
        assert_eq!(job.attempts, 1, "never rescued: {job:?}");
        assert_eq!(job.result, Some(json!("done")));
    }
    assert_eq!(started.load(Ordering::SeqCst), 5, "each ran once");
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        (report.completed, report.failed, report.released),
        (5, 0, 0),
        "the cancelled run ended without an outcome and was not given back"
    );
    assert_eq!(get(&*store, hung).await.state, JobState::Cancelled);
}

/// Start instants (tokio time) of every run, by group.
type Starts = Arc<Mutex<Vec<(String, tokio::time::Instant)>>>;

fn recording(starts: &Starts) -> Handlers {
    let starts = Arc::clone(starts);
    Handlers::new().on(
        "work",
        handler_fn(move |job| {
            starts
                .lock()
                .unwrap()
                .push((job.group.clone(), tokio::time::Instant::now()));
            async { Outcome::Completed(json!(null)) }
        }),
    )
}

/// Paused tokio time: the limiter's clock is tokio's, the handler records
/// tokio instants, and nothing advances the clock between a grant and the
/// handler's start, so the recorded instants are the grants'. The store
/// runs on a real-time runtime of its own ([`Remote`]).
#[tokio::test(start_paused = true)]
async fn queue_and_group_rates_hold_in_every_sliding_second() {
    let store = Arc::new(Remote::open(sqlite).await);
    let starts: Starts = Arc::default();
    for n in 0..40 {
        let group = if n % 4 == 0 { "small" } else { "big" };
        enqueue(&*store, NewJob::new("q", "work", json!({})).group(group)).await;
    }
    let second = Duration::from_secs(1);
    let pool = pool(
        &store,
        // Slots for all, so that every run waits in the limiter and the
        // rate, not the store's round trips, is what binds.
        QueueConfig::new("q")
            .concurrency(40)
            .rate(Limit::sliding_window(10, second))
            .group_rate(Limit::sliding_window(6, second)),
        recording(&starts),
    );
    eventually("40 completed", || async {
        count(&*store, "q", JobState::Completed).await == 40
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    let starts = starts.lock().unwrap().clone();
    let all: Vec<_> = starts.iter().map(|(_, t)| *t).collect();
    assert_eq!(all.len(), 40);
    assert!(all.is_sorted());
    assert_eq!(
        most_in_window(&all, second),
        10,
        "the queue's 10/s, reached and never exceeded"
    );
    let big: Vec<_> = starts
        .iter()
        .filter(|(g, _)| g == "big")
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(
        most_in_window(&big, second),
        6,
        "the group's 6/s, reached and never exceeded"
    );
    // 40 starts at 10 in any second need at least 3 s between first and last.
    assert!(all[39] - all[0] >= 3 * second);
}

#[tokio::test]
async fn groups_take_turns() {
    let store = Arc::new(sqlite().await);
    let starts: Starts = Arc::default();
    for _ in 0..12 {
        enqueue(&*store, NewJob::new("q", "work", json!({})).group("bulk")).await;
    }
    for _ in 0..3 {
        enqueue(
            &*store,
            NewJob::new("q", "work", json!({})).group("interactive"),
        )
        .await;
    }
    let pool = pool(
        &store,
        QueueConfig::new("q").unlimited().concurrency(1),
        recording(&starts),
    );
    eventually("15 completed", || async {
        count(&*store, "q", JobState::Completed).await == 15
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    let order: Vec<String> = starts
        .lock()
        .unwrap()
        .iter()
        .map(|(g, _)| g.clone())
        .collect();
    let late = order[..6].iter().filter(|g| *g == "interactive").count();
    assert_eq!(
        late, 3,
        "the small group enqueued last runs within the first turns: {order:?}"
    );
}

#[tokio::test]
async fn workers_run_jobs_on_postgres() {
    let Ok(url) = std::env::var("SLUICE_TEST_POSTGRES_URL") else {
        eprintln!("note: SLUICE_TEST_POSTGRES_URL is not set; skipping the PostgreSQL worker test");
        return;
    };
    let store = sluice_jobs::PostgresStore::connect(&url, sluice_jobs::StoreConfig::default())
        .await
        .expect("connect to PostgreSQL");
    // A queue name of its own: the database may hold other tests' jobs.
    let queue = format!("workers-{}-{}", std::process::id(), fastrand::u32(..));
    let store = Arc::new(store);
    let handlers = Handlers::new().on(
        "flaky",
        handler_fn(|job| async move {
            if job.attempts == 0 {
                Outcome::retry("first run fails")
            } else {
                Outcome::Completed(job.payload)
            }
        }),
    );
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(enqueue(&*store, NewJob::new(&queue, "flaky", json!({"n": n}))).await);
    }
    let pool = pool(&store, QueueConfig::new(&queue).unlimited(), handlers);
    for (n, id) in ids.into_iter().enumerate() {
        let job = wait_state(&*store, id, JobState::Completed).await;
        assert_eq!((job.attempts, job.result), (2, Some(json!({"n": n}))));
    }
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn the_cleaner_removes_finished_jobs_past_their_retention() {
    let store = Arc::new(sqlite().await);
    let handlers = echo().on("fatal", handler_fn(|_| async { Outcome::fatal("400") }));
    let done = enqueue(&*store, NewJob::new("q", "echo", json!({}))).await;
    let dead = enqueue(&*store, NewJob::new("q", "fatal", json!({}))).await;
    let pool = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q"))
        .configure(|c| {
            fast(c);
            c.cleanup_every = Some(Duration::from_millis(50));
            c.retention = sluice_jobs::Retention {
                completed: Duration::ZERO,
                dead: Duration::from_secs(3_600),
                cancelled: Duration::ZERO,
                events: Duration::from_secs(3_600),
            };
        })
        .start()
        .unwrap();
    eventually("the completed job to be cleaned", || async {
        store.get(done).await.unwrap().is_none()
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        get(&*store, dead).await.state,
        JobState::Dead,
        "kept for its hour"
    );
}

/// Polling is off (an hour): the retry can only run because the pool
/// wakes its queue when the retry it scheduled falls due, and the second
/// job only because `notify` says it was enqueued.
#[tokio::test]
async fn retries_and_notified_enqueues_run_without_waiting_for_a_poll() {
    let store = Arc::new(sqlite().await);
    let runs: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let r = Arc::clone(&runs);
    let handlers = Handlers::new()
        .on(
            "flaky",
            handler_fn(move |job| {
                r.lock().unwrap().push(std::time::Instant::now());
                async move {
                    if job.attempts == 0 {
                        Outcome::Retry {
                            error: "503".into(),
                            retry_after: Some(Duration::from_millis(100)),
                        }
                    } else {
                        Outcome::Completed(json!("ok"))
                    }
                }
            }),
        )
        .merge(echo());
    let flaky = enqueue(&*store, NewJob::new("q", "flaky", json!({}))).await;
    let pool = WorkerPool::builder(Arc::clone(&store), limiter())
        .handlers(handlers)
        .queue(QueueConfig::new("q").unlimited())
        .configure(|c| {
            fast(c);
            c.poll = Duration::from_secs(3_600);
        })
        .start()
        .unwrap();
    let job = wait_state(&*store, flaky, JobState::Completed).await;
    assert_eq!(job.attempts, 2);
    let runs = runs.lock().unwrap().clone();
    let gap = runs[1] - runs[0];
    assert!(
        gap >= Duration::from_millis(100),
        "never before its time: {gap:?}"
    );
    println!("retry due after 100 ms started after {gap:?}");
    let later = enqueue(&*store, NewJob::new("q", "echo", json!({"n": 2}))).await;
    pool.notify("q");
    wait_state(&*store, later, JobState::Completed).await;
    pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_handler_reports_progress_readable_with_the_job_and_as_events() {
    let store = Arc::new(sqlite().await);
    let start = store.events_now().await.unwrap();
    let handlers = Handlers::new().on(
        "steps",
        handler_fn(|_| async {
            for percent in [25, 50, 75] {
                if let Err(e) = sluice_jobs::worker::report_progress(json!(percent)).await {
                    return Outcome::retry(e.to_string());
                }
            }
            let done = json!({"rows": 1200, "of": 1200});
            match sluice_jobs::worker::report_progress(done).await {
                Ok(()) => Outcome::Completed(json!("ok")),
                Err(e) => Outcome::retry(e.to_string()),
            }
        }),
    );
    let id = enqueue(&*store, NewJob::new("q", "steps", json!({}))).await;
    let pool = pool(&store, QueueConfig::new("q").unlimited(), handlers);
    let job = wait_state(&*store, id, JobState::Completed).await;
    assert_eq!(job.progress, Some(json!({"rows": 1200, "of": 1200})));
    let events = store
        .events(start, &sluice_jobs::events::EventFilter::default(), 100)
        .await
        .unwrap()
        .events;
    let progress: Vec<_> = events
        .iter()
        .filter(|e| e.event == "progress")
        .map(|e| e.progress.clone().unwrap())
        .collect();
    assert_eq!(
        progress,
        [
            json!(25),
            json!(50),
            json!(75),
            json!({"rows": 1200, "of": 1200})
        ]
    );
    // Outside a run there is no job to report on.
    assert!(
        sluice_jobs::worker::report_progress(json!(1))
            .await
            .is_err()
    );
    pool.shutdown(Duration::from_secs(5)).await;
}
