//! Enqueue, claim, complete, fail, cancel, batches and listing.

use std::time::Duration;

use serde_json::json;
use sluice_jobs::{Clock, Error, JobId, JobState, JobStore, RetryDecision};

use super::{Factory, LEASE, T0, claim, claim_one, enqueue, job, open};

pub async fn enqueue_then_get(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let done = store
        .enqueue(job("q").tenant("acme").group("g1").priority(7))
        .await
        .unwrap();
    assert!(!done.duplicate);
    let j = done.job;
    assert_eq!((j.queue.as_str(), j.kind.as_str()), ("q", "test.noop"));
    assert_eq!(j.payload, json!({"n": 1}));
    assert_eq!(
        (j.tenant.as_str(), j.group.as_str(), j.priority),
        ("acme", "g1", 7)
    );
    assert_eq!(
        (j.state, j.attempts, j.max_attempts, j.reschedules),
        (JobState::Available, 0, 3, 0)
    );
    assert_eq!(
        (j.run_at, j.created_at, j.updated_at, j.finished_at),
        (T0, T0, T0, None)
    );
    assert!(j.lease.is_none() && j.result.is_none() && j.last_error.is_none());
    assert_eq!(j.idempotency_key, None);
    assert_eq!(store.get(j.id).await.unwrap(), Some(j.clone()));
    assert_eq!(store.get(JobId(j.id.0 + 1_000)).await.unwrap(), None);

    let second = enqueue(&store, job("q")).await;
    assert!(second.id > j.id, "ids grow in enqueue order");
    let err = store.enqueue(job("")).await.unwrap_err();
    assert!(
        matches!(err, Error::Invalid { field: "queue", .. }),
        "{err}"
    );
}

pub async fn delayed_job_waits_for_run_at(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q").run_at(T0 + Duration::from_secs(10))).await;
    assert_eq!(j.state, JobState::Scheduled);
    assert!(claim(&store, "q", "w", 10).await.is_empty());
    clock.advance(Duration::from_millis(9_999));
    assert!(claim(&store, "q", "w", 10).await.is_empty(), "1 ms early");
    clock.advance(Duration::from_millis(1));
    let (got, lease) = claim_one(&store, "q", "w").await;
    assert_eq!((got.id, got.state), (j.id, JobState::Running));
    assert_eq!(
        (lease.job, lease.owner.as_str(), lease.token),
        (j.id, "w", 1)
    );
    assert_eq!(lease.expires_at, clock.now() + LEASE);

    let past = enqueue(&store, job("q").run_at(T0)).await;
    assert_eq!(
        (past.state, past.run_at),
        (JobState::Available, clock.now()),
        "a past run_at means now"
    );
}

pub async fn complete_keeps_the_result(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    clock.advance(Duration::from_secs(2));
    let done = store
        .complete(&lease, json!({"role_id": "42"}))
        .await
        .unwrap();
    assert_eq!((done.state, done.attempts), (JobState::Completed, 1));
    assert_eq!(done.result, Some(json!({"role_id": "42"})));
    assert_eq!(
        (done.finished_at, done.updated_at),
        (Some(clock.now()), clock.now())
    );
    assert!(done.lease.is_none());
    assert_eq!(store.get(j.id).await.unwrap(), Some(done));

    let again = store.complete(&lease, json!(null)).await;
    assert!(
        matches!(again, Err(Error::LeaseLost(id)) if id == j.id),
        "{again:?}"
    );
    assert!(claim(&store, "q", "w", 10).await.is_empty());
}

pub async fn retries_use_attempts_then_die(f: &impl Factory) {
    let (store, clock) = open(f).await;
    enqueue(&store, job("q")).await;
    for attempt in 1..=2_u32 {
        let (_, lease) = claim_one(&store, "q", "w").await;
        let at = clock.now() + Duration::from_secs(attempt.into());
        let failed = store
            .fail(&lease, "503", RetryDecision::RetryAt(at))
            .await
            .unwrap();
        assert_eq!(
            (failed.state, failed.attempts, failed.run_at),
            (JobState::Retryable, attempt, at)
        );
        assert_eq!(failed.last_error.as_deref(), Some("503"));
        assert!(failed.lease.is_none() && failed.finished_at.is_none());
        assert!(
            claim(&store, "q", "w", 10).await.is_empty(),
            "not before its run_at"
        );
        clock.set(at);
    }
    let (_, lease) = claim_one(&store, "q", "w").await;
    let dead = store
        .fail(&lease, "503 again", RetryDecision::RetryAt(clock.now()))
        .await
        .unwrap();
    assert_eq!(
        (dead.state, dead.attempts),
        (JobState::Dead, 3),
        "the last attempt was used"
    );
    assert_eq!(dead.finished_at, Some(clock.now()));
    assert_eq!(dead.last_error.as_deref(), Some("503 again"));
    assert!(claim(&store, "q", "w", 10).await.is_empty());
}

pub async fn reschedule_keeps_attempts(f: &impl Factory) {
    let (store, clock) = open(f).await;
    enqueue(&store, job("q").max_attempts(1)).await;
    for n in 1..=5_u32 {
        let (_, lease) = claim_one(&store, "q", "w").await;
        let at = clock.now() + Duration::from_secs(1);
        let later = store
            .fail(&lease, "429", RetryDecision::RescheduleAt(at))
            .await
            .unwrap();
        assert_eq!(
            (later.state, later.attempts, later.reschedules),
            (JobState::Scheduled, 0, n)
        );
        assert_eq!(later.run_at, at);
        assert!(claim(&store, "q", "w", 1).await.is_empty());
        clock.set(at);
    }
    let (_, lease) = claim_one(&store, "q", "w").await;
    let dead = store
        .fail(&lease, "500", RetryDecision::RetryAt(clock.now()))
        .await
        .unwrap();
    assert_eq!(
        (dead.state, dead.attempts, dead.reschedules),
        (JobState::Dead, 1, 5)
    );
}

pub async fn dead_decision_skips_retries(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let j = enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    let dead = store
        .fail(&lease, "400 invalid payload", RetryDecision::Dead)
        .await
        .unwrap();
    assert_eq!(
        (dead.id, dead.state, dead.attempts),
        (j.id, JobState::Dead, 1)
    );
    assert_eq!(dead.finished_at, Some(clock.now()));
    let late = store.fail(&lease, "again", RetryDecision::Dead).await;
    assert!(matches!(late, Err(Error::LeaseLost(_))), "{late:?}");
}

pub async fn cancel_guards_states(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let a = enqueue(&store, job("q")).await;
    let b = enqueue(&store, job("q").run_at(T0 + Duration::from_secs(60))).await;
    let cancelled = store.cancel(a.id).await.unwrap();
    assert_eq!(
        (cancelled.state, cancelled.finished_at),
        (JobState::Cancelled, Some(T0))
    );
    assert_eq!(store.cancel(b.id).await.unwrap().state, JobState::Cancelled);
    let twice = store.cancel(a.id).await.unwrap_err();
    assert!(
        matches!(
            twice,
            Error::InvalidTransition {
                state: JobState::Cancelled,
                action: "cancel",
                ..
            }
        ),
        "{twice}"
    );

    let c = enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    assert_eq!(store.cancel(c.id).await.unwrap().state, JobState::Cancelled);
    assert!(matches!(
        store.complete(&lease, json!(1)).await,
        Err(Error::LeaseLost(_))
    ));
    assert!(matches!(
        store.heartbeat(&lease, LEASE).await,
        Err(Error::LeaseLost(_))
    ));

    let d = enqueue(&store, job("q")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    store.complete(&lease, json!(1)).await.unwrap();
    let done = store.cancel(d.id).await.unwrap_err();
    assert!(
        matches!(
            done,
            Error::InvalidTransition {
                state: JobState::Completed,
                ..
            }
        ),
        "{done}"
    );
    assert!(matches!(
        store.cancel(JobId(987_654)).await,
        Err(Error::NotFound(JobId(987_654)))
    ));
}
