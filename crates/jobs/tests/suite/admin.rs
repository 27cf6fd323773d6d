//! Dead letters, counts and retention.

use std::time::Duration;

use serde_json::json;
use sluice_jobs::{Clock, Error, Job, JobState, JobStore, Retention, RetryDecision};

use super::{Factory, T0, claim, claim_one, enqueue, job, open};

const HOUR: Duration = Duration::from_secs(3_600);

/// A job of `queue` that failed for good.
async fn dead(store: &impl JobStore, queue: &str) -> Job {
    let j = enqueue(store, job(queue)).await;
    let (_, lease) = claim_one(store, queue, "w").await;
    let dead = store
        .fail(&lease, "400", RetryDecision::Dead)
        .await
        .unwrap();
    assert_eq!((dead.id, dead.state), (j.id, JobState::Dead));
    dead
}

/// A job of `queue` that completed.
async fn completed(store: &impl JobStore, queue: &str) -> Job {
    enqueue(store, job(queue)).await;
    let (_, lease) = claim_one(store, queue, "w").await;
    store.complete(&lease, json!(null)).await.unwrap()
}

pub async fn retry_from_dead(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = dead(&store, "q").await;
    clock.advance(HOUR);
    let again = store.retry(j.id).await.unwrap();
    assert_eq!(
        (again.state, again.attempts, again.reschedules),
        (JobState::Available, 0, 0)
    );
    assert_eq!((again.run_at, again.finished_at), (clock.now(), None));
    assert_eq!(
        again.last_error.as_deref(),
        Some("400"),
        "the last error stays for inspection"
    );
    let twice = store.retry(j.id).await.unwrap_err();
    assert!(matches!(
        twice,
        Error::InvalidTransition {
            state: JobState::Available,
            action: "retry",
            ..
        }
    ));
    let (_, lease) = claim_one(&store, "q", "w").await;
    assert_eq!(
        store.complete(&lease, json!(1)).await.unwrap().state,
        JobState::Completed
    );
}

pub async fn retry_all_dead_of_a_queue(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for _ in 0..3 {
        dead(&store, "q").await;
    }
    dead(&store, "r").await;
    completed(&store, "q").await;
    assert_eq!(store.retry_dead("q").await.unwrap(), 3);
    assert_eq!(store.retry_dead("q").await.unwrap(), 0);
    let counts = store.counts().await.unwrap();
    let q = &counts[0].counts;
    assert_eq!((q.available, q.dead, q.completed), (3, 0, 1));
    assert_eq!(counts[1].counts.dead, 1, "other queues keep their dead");
}

pub async fn purge_removes_only_dead(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let q1 = dead(&store, "q").await;
    let q2 = dead(&store, "q").await;
    let r1 = dead(&store, "r").await;
    let done = completed(&store, "q").await;
    let waiting = enqueue(&store, job("q")).await;
    assert_eq!(store.purge_dead(Some("q")).await.unwrap(), 2);
    assert_eq!(store.get(q1.id).await.unwrap(), None);
    assert_eq!(store.get(q2.id).await.unwrap(), None);
    assert!(store.get(r1.id).await.unwrap().is_some());
    assert_eq!(store.purge_dead(None).await.unwrap(), 1);
    assert_eq!(store.get(r1.id).await.unwrap(), None);
    assert!(
        store.get(done.id).await.unwrap().is_some()
            && store.get(waiting.id).await.unwrap().is_some()
    );
}

pub async fn counts_by_queue_and_state(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    completed(&store, "q").await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("q")).await;
    claim(&store, "q", "w", 1).await;
    enqueue(&store, job("r").run_at(T0 + HOUR)).await;
    let counts = store.counts().await.unwrap();
    assert_eq!(counts.len(), 2);
    let (q, r) = (&counts[0], &counts[1]);
    assert_eq!((q.queue.as_str(), r.queue.as_str()), ("q", "r"));
    assert_eq!(
        (q.counts.available, q.counts.running, q.counts.completed),
        (2, 1, 1)
    );
    assert_eq!((q.counts.total(), q.counts.get(JobState::Running)), (4, 1));
    assert_eq!((r.counts.scheduled, r.counts.total()), (1, 1));
}

/// The counts, read from one index per state (migrations 11 and 13),
/// agree with the jobs themselves, listed by id, in every state of two
/// queues: a scheduled job that came due (still `scheduled`, now in the
/// due index) and one not yet due, a retryable one, a running one and
/// the three that finished.
pub async fn counts_match_the_jobs_in_every_state(f: &impl Factory) {
    let (store, clock) = open(f).await;
    for queue in ["q", "r"] {
        completed(&store, queue).await;
        dead(&store, queue).await;
        let gone = enqueue(&store, job(queue)).await;
        store.cancel(gone.id).await.unwrap();
        enqueue(&store, job(queue)).await;
        let (_, lease) = claim_one(&store, queue, "w").await;
        store
            .fail(&lease, "503", RetryDecision::RetryAt(T0 + HOUR))
            .await
            .unwrap();
        enqueue(&store, job(queue).run_at(T0 + 2 * HOUR)).await;
    }
    for _ in 0..3 {
        enqueue(&store, job("q").run_at(T0 + Duration::from_secs(1))).await;
    }
    enqueue(&store, job("r")).await;
    claim_one(&store, "r", "w").await;
    enqueue(&store, job("r")).await;
    clock.advance(Duration::from_secs(1));
    // Marks q's three due, and runs one.
    claim_one(&store, "q", "w").await;
    enqueue(&store, job("q")).await;

    let mut listed = std::collections::BTreeMap::new();
    let mut filter = sluice_jobs::ListFilter {
        limit: 3,
        ..sluice_jobs::ListFilter::default()
    };
    loop {
        let page = store.list(&filter).await.unwrap();
        for j in &page.jobs {
            *listed.entry((j.queue.clone(), j.state)).or_insert(0_u64) += 1;
        }
        match page.next {
            Some(next) => filter.after = Some(next),
            None => break,
        }
    }
    let mut counted = std::collections::BTreeMap::new();
    for q in store.counts().await.unwrap() {
        for state in JobState::ALL {
            if q.counts.get(state) > 0 {
                counted.insert((q.queue.clone(), state), q.counts.get(state));
            }
        }
    }
    assert_eq!(counted, listed);
    let states = |queue: &str| listed.keys().filter(|(q, _)| q == queue).count();
    assert_eq!(
        (states("q"), states("r")),
        (7, 7),
        "every state in both: {listed:?}"
    );
}

pub async fn retention_deletes_old_finished_jobs(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let done = completed(&store, "q").await;
    let died = dead(&store, "q").await;
    let gone = enqueue(&store, job("q")).await;
    store.cancel(gone.id).await.unwrap();
    let waiting = enqueue(&store, job("q").run_at(T0 + 48 * HOUR)).await;
    let running = enqueue(&store, job("busy")).await;
    claim_one(&store, "busy", "w").await;
    let keep = Retention::default();

    clock.advance(HOUR - Duration::from_millis(1));
    assert_eq!(store.cleanup(&keep).await.unwrap().completed, 0);
    clock.advance(Duration::from_millis(1));
    let cleaned = store.cleanup(&keep).await.unwrap();
    assert_eq!(
        (cleaned.completed, cleaned.dead, cleaned.cancelled),
        (1, 0, 0)
    );
    assert_eq!(store.get(done.id).await.unwrap(), None);

    clock.advance(23 * HOUR);
    let cleaned = store.cleanup(&keep).await.unwrap();
    assert_eq!(
        (cleaned.completed, cleaned.dead, cleaned.cancelled),
        (0, 1, 1)
    );
    assert_eq!(store.get(died.id).await.unwrap(), None);
    for id in [waiting.id, running.id] {
        assert!(
            store.get(id).await.unwrap().is_some(),
            "unfinished jobs are never cleaned"
        );
    }
    let now = Retention {
        completed: Duration::ZERO,
        ..Retention::default()
    };
    completed(&store, "q").await;
    assert_eq!(store.cleanup(&now).await.unwrap().completed, 1);
}

pub async fn retention_keeps_jobs_with_live_keys(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let keep = Retention::default();
    let j = enqueue(&store, job("q").idempotency_key("k")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    store.complete(&lease, json!("result")).await.unwrap();
    clock.advance(2 * HOUR);
    assert_eq!(
        store.cleanup(&keep).await.unwrap().completed,
        0,
        "the key still lives"
    );
    let dup = store.enqueue(job("q").idempotency_key("k")).await.unwrap();
    assert!(dup.duplicate && dup.job.id == j.id && dup.job.result == Some(json!("result")));

    clock.advance(22 * HOUR);
    assert_eq!(
        store.cleanup(&keep).await.unwrap().completed,
        1,
        "the key expired"
    );
    assert_eq!(store.get(j.id).await.unwrap(), None);
    let fresh = store.enqueue(job("q").idempotency_key("k")).await.unwrap();
    assert!(!fresh.duplicate && fresh.job.id != j.id);
}
