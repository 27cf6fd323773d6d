//! Job events: every change in order, read from a cursor without a gap,
//! filtered, resumable by id, with results and progress; kept for their
//! retention.

use std::time::Duration;

use serde_json::json;
use sluice_jobs::events::{EventCursor, EventFilter, JobEvent};
use sluice_jobs::{AnyStore, JobStore, Retention, RetryDecision};

use super::{Factory, T0, claim_one, enqueue, job, open};

async fn all_after(store: &AnyStore, cursor: EventCursor, filter: &EventFilter) -> Vec<JobEvent> {
    store
        .events(cursor, filter, 1_000)
        .await
        .expect("events")
        .events
}

/// [`all_after`] once at least `n` events are there: on PostgreSQL a
/// transaction still open anywhere on the server (a test running beside
/// this one) holds back the events committed after it began, and they
/// come once it ends. A bounded wait, not a timing: what is read after
/// it is checked whole.
async fn at_least(
    store: &AnyStore,
    cursor: EventCursor,
    filter: &EventFilter,
    n: usize,
) -> Vec<JobEvent> {
    let mut events = Vec::new();
    for _ in 0..1_000 {
        events = all_after(store, cursor, filter).await;
        if events.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    events
}

fn names(events: &[JobEvent]) -> Vec<(i64, &str)> {
    events.iter().map(|e| (e.job.0, e.event.as_str())).collect()
}

/// A job's life is its events, in order: enqueued, active, progress,
/// failed (with its error and next run), active, completed (with the
/// result); a cancelled and a dead job end with theirs.
pub async fn every_change_is_an_event<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    let start = store.events_now().await.expect("now");
    let a = enqueue(&store, job("q").tenant("acme")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    let with = store
        .progress(&lease, json!({"done": 1, "of": 4}))
        .await
        .expect("progress");
    assert_eq!(with.progress, Some(json!({"done": 1, "of": 4})));
    let retry_at = T0 + Duration::from_secs(5);
    store
        .fail(
            &lease,
            "503 from upstream",
            RetryDecision::RetryAt(retry_at),
        )
        .await
        .expect("fail");
    clock.advance(Duration::from_secs(5));
    let (_, lease) = claim_one(&store, "q", "w").await;
    store
        .complete_many(vec![(lease.clone(), json!({"id": "42"}))])
        .await
        .expect("complete");
    // A late progress report on a spent lease is refused.
    assert!(store.progress(&lease, json!(100)).await.is_err());
    let b = enqueue(&store, job("q").tenant("globex")).await;
    store.cancel(b.id).await.expect("cancel");
    let c = enqueue(&store, job("q").tenant("acme")).await;
    let (_, lease) = claim_one(&store, "q", "w").await;
    store
        .fail(&lease, "404", RetryDecision::Dead)
        .await
        .expect("dead");

    let events = at_least(&store, start, &EventFilter::default(), 11).await;
    let (a, b, c) = (a.id.0, b.id.0, c.id.0);
    assert_eq!(
        names(&events),
        vec![
            (a, "enqueued"),
            (a, "active"),
            (a, "progress"),
            (a, "failed"),
            (a, "active"),
            (a, "completed"),
            (b, "enqueued"),
            (b, "cancelled"),
            (c, "enqueued"),
            (c, "active"),
            (c, "dead"),
        ]
    );
    assert!(events.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
    let failed = &events[3];
    assert_eq!(failed.error.as_deref(), Some("503 from upstream"));
    assert_eq!(failed.run_at, retry_at);
    assert_eq!(events[2].progress, Some(json!({"done": 1, "of": 4})));
    assert_eq!(events[5].result, Some(json!({"id": "42"})));
    assert_eq!(events[10].error.as_deref(), Some("404"));

    // Filters: a tenant's, a job's.
    let acme = EventFilter {
        tenant: Some("acme".into()),
        ..EventFilter::default()
    };
    assert!(
        all_after(&store, start, &acme)
            .await
            .iter()
            .all(|e| e.tenant == "acme")
    );
    let only_b = EventFilter {
        job: Some(sluice_jobs::JobId(b)),
        ..EventFilter::default()
    };
    assert_eq!(all_after(&store, start, &only_b).await.len(), 2);
    // A job's timeline: its own events only, oldest first, bounded.
    let timeline = store
        .timeline(sluice_jobs::JobId(a), 1_000)
        .await
        .expect("timeline");
    let kinds: Vec<&str> = timeline.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "enqueued",
            "active",
            "progress",
            "failed",
            "active",
            "completed"
        ]
    );
    assert_eq!(timeline[3].error.as_deref(), Some("503 from upstream"));
    let first_two = store
        .timeline(sluice_jobs::JobId(a), 2)
        .await
        .expect("timeline");
    assert_eq!(first_two.len(), 2);

    // Pages of two read every event once, in order.
    let mut cursor = start;
    let mut paged = Vec::new();
    loop {
        let page = store
            .events(cursor, &EventFilter::default(), 2)
            .await
            .expect("page");
        paged.extend(page.events.iter().map(|e| e.id));
        cursor = page.cursor;
        if !page.full {
            break;
        }
    }
    assert_eq!(paged, events.iter().map(|e| e.id).collect::<Vec<_>>());

    // Resumed from an id (`Last-Event-ID`): the events after it.
    let resumed = store.event_cursor(events[6].id).await.expect("cursor");
    let after = all_after(&store, resumed, &EventFilter::default()).await;
    assert_eq!(after.first().map(|e| e.id), Some(events[7].id));
    assert_eq!(after.len(), 4);

    // Retention forgets old events and keeps those still within it.
    clock.advance(Duration::from_secs(7_200));
    let d = enqueue(&store, job("q")).await;
    let cleaned = store.cleanup(&Retention::default()).await.expect("cleanup");
    assert_eq!(cleaned.events, 11);
    let kept = at_least(&store, start, &EventFilter::default(), 1).await;
    assert_eq!(names(&kept), [(d.id.0, "enqueued")]);
}

/// What a timeline shows of an event: all but its ids (an event the index
/// by job does not list is put back with none) and a result (the stream
/// adds it).
fn seen(e: &JobEvent) -> String {
    format!(
        "{} {} {}/{}/{} attempts {} run_at {} at {} {:?} {:?}",
        e.job.0,
        e.event,
        e.tenant,
        e.queue,
        e.kind,
        e.attempts,
        e.run_at.as_millis(),
        e.at.as_millis(),
        e.error,
        e.progress
    )
}

/// A job's timeline is its events as the stream has them, whatever the
/// job went through and wherever a page ends, although the index by job
/// does not list the `active` and `completed` events (migrations 12 and
/// 14): those are put back from the rows.
pub async fn a_timeline_is_the_jobs_stream<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    let start = store.events_now().await.expect("now");
    let tick = || clock.advance(Duration::from_millis(10));
    let mut jobs = Vec::new();

    // Failed once with progress, then completed with progress.
    jobs.push(enqueue(&store, job("ta").tenant("acme")).await.id);
    tick();
    let (_, lease) = claim_one(&store, "ta", "w").await;
    for done in 1..=2 {
        tick();
        store
            .progress(&lease, json!({ "done": done }))
            .await
            .expect("progress");
    }
    tick();
    let again = sluice_jobs::Clock::now(&clock) + Duration::from_secs(1);
    store
        .fail(&lease, "503", RetryDecision::RetryAt(again))
        .await
        .expect("fail");
    clock.advance(Duration::from_secs(1));
    let (_, lease) = claim_one(&store, "ta", "w").await;
    tick();
    store
        .progress(&lease, json!("half"))
        .await
        .expect("progress");
    tick();
    store
        .complete_many(vec![(lease, json!(1))])
        .await
        .expect("complete");

    // Cancelled while running.
    jobs.push(enqueue(&store, job("tc")).await.id);
    tick();
    let (running, _) = claim_one(&store, "tc", "w").await;
    tick();
    store.cancel(running.id).await.expect("cancel");

    // Rescued, rescheduled without an attempt, dead, retried, completed.
    jobs.push(enqueue(&store, job("td").tenant("globex")).await.id);
    tick();
    claim_one(&store, "td", "w").await;
    clock.advance(super::LEASE + Duration::from_secs(1));
    assert_eq!(store.rescue().await.expect("rescue").len(), 1);
    tick();
    let (_, lease) = claim_one(&store, "td", "w").await;
    tick();
    let later = sluice_jobs::Clock::now(&clock) + Duration::from_secs(1);
    store
        .fail(&lease, "429", RetryDecision::RescheduleAt(later))
        .await
        .expect("reschedule");
    clock.advance(Duration::from_secs(1));
    let (_, lease) = claim_one(&store, "td", "w").await;
    tick();
    store
        .fail(&lease, "400", RetryDecision::Dead)
        .await
        .expect("dead");
    tick();
    store.retry(jobs[2]).await.expect("retry");
    tick();
    let (_, lease) = claim_one(&store, "td", "w").await;
    tick();
    store
        .complete_many(vec![(lease, json!(2))])
        .await
        .expect("complete");

    // Running now, with progress (claimed after the rescue above).
    jobs.push(enqueue(&store, job("tb")).await.id);
    tick();
    let (_, lease) = claim_one(&store, "tb", "w").await;
    tick();
    store.progress(&lease, json!(7)).await.expect("progress");

    let all = at_least(&store, start, &EventFilter::default(), 24).await;
    for id in jobs {
        let stream: Vec<String> = all.iter().filter(|e| e.job == id).map(seen).collect();
        let timeline: Vec<String> = store
            .timeline(id, 1_000)
            .await
            .expect("timeline")
            .iter()
            .map(seen)
            .collect();
        assert_eq!(timeline, stream, "job {id}");
        for n in 1..stream.len() {
            let page: Vec<String> = store
                .timeline(id, n as u32)
                .await
                .expect("timeline")
                .iter()
                .map(seen)
                .collect();
            assert_eq!(page, stream[..n], "job {id}, first {n}");
        }
    }
}
