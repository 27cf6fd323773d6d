//! Batches (all or nothing) and listing by cursor.

use serde_json::json;
use sluice_jobs::{Error, JobId, JobState, JobStore, ListFilter};

use super::{Factory, claim_one, enqueue, job, open};

pub async fn batch_is_atomic(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let ok = store
        .enqueue_batch(vec![job("q"), job("q").priority(2), job("r")])
        .await
        .unwrap();
    let queues: Vec<&str> = ok.iter().map(|e| e.job.queue.as_str()).collect();
    assert_eq!(queues, ["q", "q", "r"]);
    assert!(ok.windows(2).all(|w| w[0].job.id < w[1].job.id) && ok.iter().all(|e| !e.duplicate));

    // The bad job is the last one: the two before it are not stored either.
    let batch = vec![job("b1"), job("b1"), job("b1").max_attempts(0)];
    let err = store.enqueue_batch(batch).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                field: "max_attempts",
                ..
            }
        ),
        "{err}"
    );
    let filter = ListFilter {
        queue: Some("b1".into()),
        ..ListFilter::default()
    };
    assert!(
        store.list(&filter).await.unwrap().jobs.is_empty(),
        "a failed batch stores nothing"
    );

    let batch = vec![job("b2").idempotency_key("k"), job("")];
    assert!(store.enqueue_batch(batch).await.is_err());
    let retried = store.enqueue(job("b2").idempotency_key("k")).await.unwrap();
    assert!(
        !retried.duplicate,
        "a failed batch takes no idempotency key"
    );
    assert!(store.enqueue_batch(Vec::new()).await.unwrap().is_empty());
}

pub async fn list_pages_by_cursor(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let mut a_ids = Vec::new();
    for _ in 0..5 {
        a_ids.push(enqueue(&store, job("a")).await.id);
    }
    for _ in 0..2 {
        enqueue(&store, job("b")).await;
    }
    let (_, lease) = claim_one(&store, "a", "w").await;
    store.complete(&lease, json!(null)).await.unwrap();

    let mut filter = ListFilter {
        queue: Some("a".into()),
        limit: 2,
        ..ListFilter::default()
    };
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.list(&filter).await.unwrap();
        pages += 1;
        seen.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(next) => filter.after = Some(next),
            None => break,
        }
    }
    assert_eq!((seen, pages), (a_ids, 3));

    let completed = ListFilter {
        state: Some(JobState::Completed),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&completed).await.unwrap().jobs.len(), 1);
    let b = ListFilter {
        queue: Some("b".into()),
        state: Some(JobState::Available),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&b).await.unwrap().jobs.len(), 2);
    let all = store.list(&ListFilter::default()).await.unwrap();
    assert_eq!((all.jobs.len(), all.next), (7, None));
}

/// A tenant's page is filled from its own jobs, however many of another
/// tenant's come before and between them.
pub async fn list_filters_by_tenant(f: &impl Factory) {
    let (store, _) = open(f).await;
    let mut mine = Vec::new();
    for i in 0..60 {
        let tenant = if i % 20 == 19 { "a" } else { "b" };
        let id = store.enqueue(job("q").tenant(tenant)).await.unwrap().job.id;
        if tenant == "a" {
            mine.push(id);
        }
    }
    let mut filter = ListFilter {
        tenant: Some("a".into()),
        limit: 2,
        ..ListFilter::default()
    };
    let first = store.list(&filter).await.unwrap();
    let ids: Vec<_> = first.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, mine[..2]);
    assert!(first.jobs.iter().all(|j| j.tenant == "a"));
    filter.after = first.next;
    let second = store.list(&filter).await.unwrap();
    let ids: Vec<_> = second.jobs.iter().map(|j| j.id).collect();
    assert_eq!((ids.as_slice(), second.next), (&mine[2..], None));
    let other = ListFilter {
        tenant: Some("nobody".into()),
        ..ListFilter::default()
    };
    assert!(store.list(&other).await.unwrap().jobs.is_empty());

    // With queue and state filters too: a's one job in queue r, and its
    // one cancelled job, each among b's jobs of the same queue and state.
    let in_r = store.enqueue(job("r").tenant("a")).await.unwrap().job.id;
    for _ in 0..20 {
        let b = store.enqueue(job("r").tenant("b")).await.unwrap().job.id;
        store.cancel(b).await.unwrap();
    }
    store.cancel(mine[0]).await.unwrap();
    let page = |queue: Option<&str>, state: Option<JobState>| ListFilter {
        queue: queue.map(str::to_owned),
        state,
        tenant: Some("a".into()),
        limit: 2,
        ..ListFilter::default()
    };
    let listed = |filter: ListFilter| {
        let store = &store;
        async move {
            let page = store.list(&filter).await.unwrap();
            let ids: Vec<JobId> = page.jobs.iter().map(|j| j.id).collect();
            (ids, page.next)
        }
    };
    assert_eq!(listed(page(Some("r"), None)).await, (vec![in_r], None));
    let cancelled = Some(JobState::Cancelled);
    assert_eq!(listed(page(None, cancelled)).await, (vec![mine[0]], None));
    assert_eq!(
        listed(page(Some("q"), cancelled)).await,
        (vec![mine[0]], None)
    );
    assert_eq!(listed(page(Some("r"), cancelled)).await, (vec![], None));
}
