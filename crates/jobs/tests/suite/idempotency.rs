//! Idempotency keys: one job per (tenant, key) within the TTL.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sluice_jobs::{JobState, JobStore};
use tokio::task::JoinSet;

use super::{Factory, claim_one, enqueue, job, open};

const DAY: Duration = Duration::from_secs(86_400);

pub async fn duplicate_returns_the_original(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let first = store
        .enqueue(job("q").tenant("acme").idempotency_key("k1"))
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert_eq!(first.job.idempotency_key.as_deref(), Some("k1"));
    let again = store
        .enqueue(job("other").tenant("acme").idempotency_key("k1"))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.job, first.job, "the original, not the new request");

    let (_, lease) = claim_one(&store, "q", "w").await;
    store.complete(&lease, json!("done")).await.unwrap();
    let late = store
        .enqueue(job("q").tenant("acme").idempotency_key("k1"))
        .await
        .unwrap();
    assert!(late.duplicate);
    assert_eq!(
        (late.job.id, late.job.state),
        (first.job.id, JobState::Completed)
    );
    assert_eq!(late.job.result, Some(json!("done")));
    let total: u64 = store
        .counts()
        .await
        .unwrap()
        .iter()
        .map(|q| q.counts.total())
        .sum();
    assert_eq!(total, 1);
}

pub async fn keys_are_per_tenant(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let a = store
        .enqueue(job("q").tenant("acme").idempotency_key("k"))
        .await
        .unwrap();
    let b = store
        .enqueue(job("q").tenant("globex").idempotency_key("k"))
        .await
        .unwrap();
    assert!(!a.duplicate && !b.duplicate);
    assert_ne!(a.job.id, b.job.id);
    let x = enqueue(&store, job("q")).await;
    let y = enqueue(&store, job("q")).await;
    assert_ne!(x.id, y.id, "no key, no deduplication");
}

pub async fn key_expires_after_ttl(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let keyed = || job("q").idempotency_key("k");
    let first = store.enqueue(keyed()).await.unwrap().job;
    clock.advance(DAY - Duration::from_millis(1));
    assert!(
        store.enqueue(keyed()).await.unwrap().duplicate,
        "1 ms before the TTL"
    );
    clock.advance(Duration::from_millis(1));
    let second = store.enqueue(keyed()).await.unwrap();
    assert!(!second.duplicate, "the key expired");
    assert_ne!(second.job.id, first.id);
    let third = store.enqueue(keyed()).await.unwrap();
    assert!(
        third.duplicate && third.job.id == second.job.id,
        "the new job holds the key"
    );
    assert!(
        store.get(first.id).await.unwrap().is_some(),
        "the old job stays"
    );
}

pub async fn duplicate_within_a_batch(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let batch = vec![
        job("q").idempotency_key("k"),
        job("q").idempotency_key("k"),
        job("q"),
    ];
    let out = store.enqueue_batch(batch).await.unwrap();
    let dups: Vec<bool> = out.iter().map(|e| e.duplicate).collect();
    assert_eq!(dups, [false, true, false]);
    assert_eq!(out[0].job.id, out[1].job.id);
}

/// A batch larger than one insert statement, mixing new keys, a key held
/// by an earlier job, a key given twice and jobs without keys: every job
/// is answered in order, the new ones numbered in batch order.
pub async fn large_batch_with_keys(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let earlier = enqueue(&store, job("q").tenant("acme").idempotency_key("held")).await;
    let batch: Vec<_> = (0..1_300)
        .map(|i| {
            let j = job("q").tenant("acme").priority(i);
            match i {
                700 => j.idempotency_key("held"),
                3 | 900 => j.idempotency_key("twice"),
                i if i % 10 == 0 => j.idempotency_key(format!("k{i}")),
                _ => j,
            }
        })
        .collect();
    let out = store.enqueue_batch(batch).await.unwrap();
    assert_eq!(out.len(), 1_300);
    assert_eq!(out[700].job.id, earlier.id);
    assert!(out[700].duplicate);
    assert!(out[900].duplicate && !out[3].duplicate);
    assert_eq!(out[900].job.id, out[3].job.id);
    let new: Vec<_> = out
        .iter()
        .filter(|e| !e.duplicate)
        .map(|e| &e.job)
        .collect();
    assert_eq!(new.len(), 1_298);
    assert!(
        new.windows(2).all(|w| w[0].id < w[1].id),
        "ids in batch order"
    );
    for (i, e) in out.iter().enumerate() {
        if i != 700 && i != 900 {
            assert_eq!(
                e.job.priority,
                i32::try_from(i).unwrap(),
                "answer {i} is its own job"
            );
        }
    }
    assert_eq!(out[10].job.idempotency_key.as_deref(), Some("k10"));
    let again = store
        .enqueue(job("q").tenant("acme").idempotency_key("k10"))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.job.id, out[10].job.id, "the key points at its job");
    let again = store
        .enqueue(job("q").tenant("acme").idempotency_key("twice"))
        .await
        .unwrap();
    assert_eq!(again.job.id, out[3].job.id);
}

pub async fn concurrent_enqueues_with_one_key<F: Factory>(f: &F) {
    let (store, _clock) = open(f).await;
    let store = Arc::new(store);
    let mut tasks = JoinSet::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            store
                .enqueue(job("q").idempotency_key("once"))
                .await
                .unwrap()
        });
    }
    let mut ids = HashSet::new();
    let mut originals = 0;
    while let Some(done) = tasks.join_next().await {
        let done = done.unwrap();
        ids.insert(done.job.id);
        originals += usize::from(!done.duplicate);
    }
    assert_eq!((ids.len(), originals), (1, 1), "one job, seven duplicates");
}
