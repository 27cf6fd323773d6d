//! Leases: heartbeats, rescue of expired leases, and refusal of workers
//! that lost theirs.

use std::time::Duration;

use serde_json::json;
use sluice_jobs::{
    Clock, Error, JobId, JobState, JobStore, Lease, ManualClock, NewJob, RetryDecision,
};

use super::{Factory, LEASE, T0, claim_one, enqueue, job, open, state};

pub async fn heartbeat_extends_the_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    assert_eq!(lease.expires_at, T0 + LEASE);
    clock.advance(Duration::from_secs(20));
    let renewed = store.heartbeat(&lease, LEASE).await.unwrap();
    assert_eq!(renewed.expires_at, T0 + Duration::from_secs(50));
    assert_eq!((renewed.token, renewed.owner.as_str()), (lease.token, "w"));

    clock.advance(Duration::from_secs(29));
    assert!(
        store.rescue().await.unwrap().is_empty(),
        "the renewed lease holds"
    );
    clock.advance(Duration::from_secs(1));
    let rescued = store.rescue().await.unwrap();
    assert_eq!(rescued.iter().map(|j| j.id).collect::<Vec<_>>(), [j.id]);
    let lost = store.heartbeat(&renewed, LEASE).await;
    assert!(matches!(lost, Err(Error::LeaseLost(_))), "{lost:?}");
}

/// Many leases renewed at once: each guarded on its own, answered in order.
pub async fn heartbeat_many_guards_each_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    assert!(
        store
            .heartbeat_many(Vec::new(), LEASE)
            .await
            .unwrap()
            .is_empty()
    );
    let stale_job = enqueue(&store, job("q")).await;
    let (_, stale) = claim_one(&store, "q", "w1").await;
    clock.advance(LEASE);
    assert_eq!(store.rescue().await.unwrap().len(), 1);
    let (_, current) = claim_one(&store, "q", "w2").await;
    assert_eq!(current.job, stale_job.id);
    let a = enqueue(&store, job("q")).await;
    let (_, la) = claim_one(&store, "q", "w1").await;
    assert_eq!(la.job, a.id);
    let missing = Lease {
        job: JobId(i64::MAX),
        ..la.clone()
    };

    clock.advance(Duration::from_secs(10));
    let answers = store
        .heartbeat_many(
            vec![la.clone(), stale.clone(), current.clone(), missing],
            LEASE,
        )
        .await
        .expect("the batch as a whole is written");
    assert_eq!(answers.len(), 4, "one answer per lease, in order");
    let renewed = answers[0].as_ref().expect("a's lease holds");
    assert_eq!(renewed.expires_at, clock.now() + LEASE);
    assert_eq!((renewed.job, renewed.token), (la.job, la.token));
    assert!(
        matches!(answers[1], Err(Error::LeaseLost(id)) if id == stale_job.id),
        "{:?}",
        answers[1]
    );
    let current_renewed = answers[2].as_ref().expect("the current lease holds");
    assert_eq!(current_renewed.token, current.token);
    assert!(
        matches!(answers[3], Err(Error::NotFound(JobId(i64::MAX)))),
        "{:?}",
        answers[3]
    );
    clock.advance(LEASE - Duration::from_millis(1));
    assert!(
        store.rescue().await.unwrap().is_empty(),
        "both renewed leases hold"
    );
    let zero = store.heartbeat_many(vec![la], Duration::ZERO).await;
    assert!(
        matches!(zero, Err(Error::Invalid { field: "lease", .. })),
        "{zero:?}"
    );
}

pub async fn expired_lease_is_rescued_and_old_worker_refused(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q")).await;
    let (_, old) = claim_one(&store, "q", "w1").await;
    clock.advance(LEASE);
    let rescued = store.rescue().await.unwrap();
    assert_eq!(rescued.len(), 1);
    let r = &rescued[0];
    assert_eq!(
        (r.id, r.state, r.attempts, r.run_at),
        (j.id, JobState::Retryable, 1, clock.now())
    );
    assert!(r.lease.is_none());
    assert!(
        r.last_error.as_deref().is_some_and(|e| e.contains("w1")),
        "{:?}",
        r.last_error
    );
    assert!(store.rescue().await.unwrap().is_empty(), "rescued once");

    assert!(matches!(
        store.complete(&old, json!(1)).await,
        Err(Error::LeaseLost(_))
    ));
    assert!(matches!(
        store.heartbeat(&old, LEASE).await,
        Err(Error::LeaseLost(_))
    ));
    let fail = store.fail(&old, "x", RetryDecision::Dead).await;
    assert!(matches!(fail, Err(Error::LeaseLost(_))), "{fail:?}");

    let (_, new) = claim_one(&store, "q", "w2").await;
    assert_eq!(new.token, 2);
    let done = store.complete(&new, json!(2)).await.unwrap();
    assert_eq!(
        (done.state, done.attempts, done.result),
        (JobState::Completed, 2, Some(json!(2)))
    );
}

pub async fn rescue_never_takes_a_live_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let idle = enqueue(&store, job("idle")).await;
    enqueue(&store, job("q")).await;
    let (_, mut lease) = claim_one(&store, "q", "w").await;
    for _ in 0..10 {
        clock.advance(Duration::from_secs(20));
        lease = store.heartbeat(&lease, LEASE).await.unwrap();
        assert!(
            store.rescue().await.unwrap().is_empty(),
            "running long is not a crash"
        );
    }
    let done = store.complete(&lease, json!(null)).await.unwrap();
    assert_eq!((done.state, done.attempts), (JobState::Completed, 1));
    clock.advance(Duration::from_secs(86_400));
    assert!(store.rescue().await.unwrap().is_empty());
    assert_eq!(
        state(&store, idle.id).await,
        JobState::Available,
        "waiting long is not a crash"
    );
}

pub async fn rescue_of_last_attempt_is_dead(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q").max_attempts(2)).await;
    claim_one(&store, "q", "w").await;
    clock.advance(LEASE);
    assert_eq!(store.rescue().await.unwrap()[0].state, JobState::Retryable);
    claim_one(&store, "q", "w").await;
    clock.advance(LEASE);
    let rescued = store.rescue().await.unwrap();
    assert_eq!(
        (rescued[0].id, rescued[0].state, rescued[0].attempts),
        (j.id, JobState::Dead, 2)
    );
    assert_eq!(rescued[0].finished_at, Some(clock.now()));
}

pub async fn reclaim_by_same_worker_gets_new_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    enqueue(&store, job("q")).await;
    let (_, old) = claim_one(&store, "q", "w").await;
    clock.advance(LEASE);
    store.rescue().await.unwrap();
    let (_, new) = claim_one(&store, "q", "w").await;
    assert_ne!(old.token, new.token);
    assert!(matches!(
        store.complete(&old, json!("stale")).await,
        Err(Error::LeaseLost(_))
    ));
    assert!(matches!(
        store.heartbeat(&old, LEASE).await,
        Err(Error::LeaseLost(_))
    ));
    assert_eq!(
        store.complete(&new, json!("fresh")).await.unwrap().result,
        Some(json!("fresh"))
    );
}

pub async fn late_completion_before_rescue_is_accepted(f: &impl Factory) {
    // Nobody took the job back yet, so nobody else can hold it: the result
    // stands rather than running the job twice.
    let (store, clock) = open(f).await;
    enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    clock.advance(LEASE * 2);
    let done = store.complete(&lease, json!(null)).await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    assert!(store.rescue().await.unwrap().is_empty());
}

pub async fn unknown_job_is_not_found(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let id = JobId(987_654);
    let lease = Lease {
        job: id,
        owner: "w".into(),
        token: 1,
        expires_at: T0,
    };
    assert!(matches!(store.heartbeat(&lease, LEASE).await, Err(Error::NotFound(x)) if x == id));
    assert!(matches!(
        store.complete(&lease, json!(1)).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.fail(&lease, "e", RetryDecision::Dead).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(store.retry(id).await, Err(Error::NotFound(_))));
    let zero = store.heartbeat(&lease, Duration::ZERO).await;
    assert!(
        matches!(zero, Err(Error::Invalid { field: "lease", .. })),
        "{zero:?}"
    );
}

/// A batch of five completions: job `a`'s, a lease a rescue took back
/// (its job now held by `current`), job `b`'s, one of a job that does not
/// exist, and `a`'s again.
struct FiveCompletions {
    items: Vec<(Lease, serde_json::Value)>,
    a: JobId,
    b: JobId,
    stale: JobId,
    current: Lease,
}

async fn five_completions(store: &impl JobStore, clock: &ManualClock) -> FiveCompletions {
    let stale_job = enqueue(store, job("q")).await;
    let (_, stale) = claim_one(store, "q", "w1").await;
    clock.advance(LEASE);
    assert_eq!(store.rescue().await.unwrap().len(), 1);
    let (_, current) = claim_one(store, "q", "w2").await;
    assert_eq!(current.job, stale_job.id);

    let a = enqueue(store, job("q")).await;
    let b = enqueue(store, NewJob::new("q", "test.noop", json!({"b": true}))).await;
    let (_, la) = claim_one(store, "q", "w1").await;
    let (_, lb) = claim_one(store, "q", "w1").await;
    assert_eq!((la.job, lb.job), (a.id, b.id));
    let missing = Lease {
        job: JobId(i64::MAX),
        ..la.clone()
    };
    FiveCompletions {
        items: vec![
            (la.clone(), json!({"a": 1})),
            (stale, json!("stale")),
            (lb, json!("b")),
            (missing, json!(null)),
            (la, json!("again")),
        ],
        a: a.id,
        b: b.id,
        stale: stale_job.id,
        current,
    }
}

/// The answers of [`five_completions`] that must be refusals are, and
/// what the store holds after them: `a` completed once, by its first
/// item, `b` completed, and the rescued job still with its new owner.
async fn refused_alone<T: std::fmt::Debug>(
    store: &impl JobStore,
    batch: &FiveCompletions,
    answers: &[Result<T, Error>],
) {
    assert_eq!(answers.len(), 5, "one answer per item, in order");
    assert!(
        matches!(answers[1], Err(Error::LeaseLost(id)) if id == batch.stale),
        "{:?}",
        answers[1]
    );
    assert!(
        matches!(answers[3], Err(Error::NotFound(_))),
        "{:?}",
        answers[3]
    );
    assert!(
        matches!(answers[4], Err(Error::LeaseLost(id)) if id == batch.a),
        "a repeat completes nothing: {:?}",
        answers[4]
    );
    for (id, result) in [(batch.a, json!({"a": 1})), (batch.b, json!("b"))] {
        let done = store.get(id).await.unwrap().unwrap();
        assert_eq!(
            (done.state, done.attempts, done.result, done.lease),
            (JobState::Completed, 1, Some(result), None),
            "completed once, by the first item"
        );
    }
    let held = store.get(batch.stale).await.unwrap().unwrap();
    assert_eq!(
        (held.state, held.lease),
        (JobState::Running, Some(batch.current.clone())),
        "the new owner keeps the job"
    );
}

pub async fn complete_many_guards_each_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    assert!(store.complete_many(Vec::new()).await.unwrap().is_empty());
    let batch = five_completions(&store, &clock).await;
    let answers = store
        .complete_many(batch.items.clone())
        .await
        .expect("the batch as a whole is written");
    let done_a = answers[0].as_ref().expect("a completes");
    assert_eq!(
        (
            done_a.id,
            done_a.state,
            done_a.attempts,
            done_a.result.clone()
        ),
        (batch.a, JobState::Completed, 1, Some(json!({"a": 1})))
    );
    assert!(done_a.lease.is_none());
    let done_b = answers[2]
        .as_ref()
        .expect("the stale lease does not poison b");
    assert_eq!(
        (done_b.id, done_b.state, done_b.result.clone()),
        (batch.b, JobState::Completed, Some(json!("b")))
    );
    refused_alone(&store, &batch, &answers).await;
    let done = store.complete(&batch.current, json!("w2")).await.unwrap();
    assert_eq!((done.state, done.attempts), (JobState::Completed, 2));
}

/// The pool's batches answer ids only: the same guards as
/// `complete_many`, and the jobs stored completed with their results.
pub async fn complete_many_ids_guards_each_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    assert!(
        store
            .complete_many_ids(Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
    let batch = five_completions(&store, &clock).await;
    let answers = store
        .complete_many_ids(batch.items.clone())
        .await
        .expect("the batch as a whole is written");
    assert_eq!(answers[0].as_ref().ok(), Some(&batch.a));
    assert_eq!(answers[2].as_ref().ok(), Some(&batch.b));
    refused_alone(&store, &batch, &answers).await;
}

pub async fn complete_many_of_many_jobs(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let jobs: Vec<_> = (0..300)
        .map(|i| NewJob::new("q", "test.noop", json!({"i": i})))
        .collect();
    store.enqueue_batch(jobs).await.unwrap();
    let claimed = store.claim("q", "w", 300, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 300);
    let done: Vec<_> = claimed
        .iter()
        .map(|j| (j.lease.clone().unwrap(), j.payload.clone()))
        .collect();
    let answers = store.complete_many(done).await.unwrap();
    for (job, answer) in claimed.iter().zip(&answers) {
        let answer = answer.as_ref().expect("completed");
        assert_eq!(answer.id, job.id, "answers follow the items' order");
        assert_eq!(answer.result.as_ref(), Some(&job.payload));
    }
    for j in &claimed {
        assert_eq!(state(&store, j.id).await, JobState::Completed);
    }
}

pub async fn fail_many_guards_each_lease(f: &impl Factory) {
    let (store, clock) = open(f).await;
    assert!(store.fail_many(Vec::new()).await.unwrap().is_empty());
    let stale_job = enqueue(&store, job("q")).await;
    let (_, stale) = claim_one(&store, "q", "w1").await;
    clock.advance(LEASE);
    store.rescue().await.unwrap();
    let (_, current) = claim_one(&store, "q", "w2").await;

    let a = enqueue(&store, job("q")).await;
    let b = enqueue(&store, job("q")).await;
    let c = enqueue(&store, job("q").max_attempts(1)).await;
    let (_, la) = claim_one(&store, "q", "w1").await;
    let (_, lb) = claim_one(&store, "q", "w1").await;
    let (_, lc) = claim_one(&store, "q", "w1").await;
    assert_eq!((la.job, lb.job, lc.job), (a.id, b.id, c.id));
    let later = clock.now() + Duration::from_secs(5);
    let answers = store
        .fail_many(vec![
            (la.clone(), "boom".to_owned(), RetryDecision::RetryAt(later)),
            (stale, "stale".to_owned(), RetryDecision::Dead),
            (lb, "429".to_owned(), RetryDecision::RescheduleAt(later)),
            (lc, "last".to_owned(), RetryDecision::RetryAt(later)),
            (la, "again".to_owned(), RetryDecision::Dead),
        ])
        .await
        .expect("the batch as a whole is written");
    assert_eq!(answers.len(), 5);
    let ra = answers[0].as_ref().expect("a fails");
    assert_eq!(
        (ra.state, ra.attempts, ra.run_at, ra.last_error.as_deref()),
        (JobState::Retryable, 1, later, Some("boom"))
    );
    assert!(
        matches!(answers[1], Err(Error::LeaseLost(id)) if id == stale_job.id),
        "{:?}",
        answers[1]
    );
    let rb = answers[2]
        .as_ref()
        .expect("the stale lease does not poison b");
    assert_eq!(
        (rb.state, rb.attempts, rb.reschedules),
        (JobState::Scheduled, 0, 1)
    );
    let rc = answers[3].as_ref().expect("c fails");
    assert_eq!(rc.state, JobState::Dead, "its last attempt");
    assert!(
        matches!(answers[4], Err(Error::LeaseLost(id)) if id == a.id),
        "the first item ended the lease: {:?}",
        answers[4]
    );
    assert_eq!(state(&store, a.id).await, JobState::Retryable);
    let held = store.get(stale_job.id).await.unwrap().unwrap();
    assert_eq!((held.state, held.lease), (JobState::Running, Some(current)));
}

/// An upstream's error body may hold NUL bytes, which PostgreSQL's `TEXT`
/// refuses: written as U+FFFD, they fail neither their job nor the others
/// of the batch.
pub async fn errors_with_nul_bytes_fail_no_batch(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let a = enqueue(&store, job("q")).await;
    let b = enqueue(&store, job("q")).await;
    let (_, la) = claim_one(&store, "q", "w1").await;
    let (_, lb) = claim_one(&store, "q", "w1").await;
    let later = clock.now() + Duration::from_secs(5);
    let answers = store
        .fail_many(vec![
            (la, "bad\0body".to_owned(), RetryDecision::RetryAt(later)),
            (lb, "fine".to_owned(), RetryDecision::RetryAt(later)),
        ])
        .await
        .expect("the batch is written");
    let ra = answers[0].as_ref().expect("a is recorded");
    assert_eq!(ra.last_error.as_deref(), Some("bad\u{FFFD}body"));
    assert_eq!(
        answers[1]
            .as_ref()
            .expect("b is recorded")
            .last_error
            .as_deref(),
        Some("fine")
    );
    assert_eq!(state(&store, a.id).await, JobState::Retryable);
    assert_eq!(state(&store, b.id).await, JobState::Retryable);
}

/// What `refused_items_fail_alone` needs of a store: its database refuses
/// (by a trigger) to store the result `"poison"` or the error `poison`.
pub const POISON_RESULT: &str = "\"poison\"";

/// A batch of outcomes the database refuses for one item writes the others:
/// their jobs must not run again once their leases expire. Run by each
/// backend on a store whose database refuses [`POISON_RESULT`].
pub async fn refused_items_fail_alone(store: &impl JobStore, clock: &ManualClock) {
    for _ in 0..6 {
        enqueue(store, job("q")).await;
    }
    let mut leases = Vec::new();
    for _ in 0..6 {
        leases.push(claim_one(store, "q", "w").await.1);
    }
    let answers = store
        .complete_many(vec![
            (leases[0].clone(), json!("fine")),
            (leases[1].clone(), json!("poison")),
            (leases[2].clone(), json!("fine")),
        ])
        .await
        .expect("the items the database takes are written");
    assert!(answers[0].is_ok() && answers[2].is_ok(), "{answers:?}");
    assert!(matches!(answers[1], Err(Error::Database(_))), "{answers:?}");
    assert_eq!(state(store, leases[0].job).await, JobState::Completed);
    assert_eq!(state(store, leases[1].job).await, JobState::Running);
    assert_eq!(state(store, leases[2].job).await, JobState::Completed);

    let later = clock.now() + Duration::from_secs(5);
    let answers = store
        .fail_many(vec![
            (
                leases[3].clone(),
                "poison".to_owned(),
                RetryDecision::RetryAt(later),
            ),
            (
                leases[4].clone(),
                "fine".to_owned(),
                RetryDecision::RetryAt(later),
            ),
            (leases[5].clone(), "fine".to_owned(), RetryDecision::Dead),
        ])
        .await
        .expect("the items the database takes are written");
    assert!(matches!(answers[0], Err(Error::Database(_))), "{answers:?}");
    assert!(answers[1].is_ok() && answers[2].is_ok(), "{answers:?}");
    assert_eq!(state(store, leases[3].job).await, JobState::Running);
    assert_eq!(state(store, leases[4].job).await, JobState::Retryable);
    assert_eq!(state(store, leases[5].job).await, JobState::Dead);
}
