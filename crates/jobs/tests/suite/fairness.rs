//! Claim order: turns across groups, priority within a group, pause.

use sluice_jobs::{Error, JobStore};

use super::{Factory, claim, claim_one, enqueue, job, open};

pub async fn groups_take_turns(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for (group, n) in [("a", 4), ("b", 2), ("c", 1)] {
        for _ in 0..n {
            enqueue(&store, job("q").group(group)).await;
        }
    }
    let mut order = String::new();
    for _ in 0..7 {
        order += &claim_one(&store, "q", "w").await.0.group;
    }
    assert_eq!(order, "abcabaa", "a busy group cannot starve the others");
}

pub async fn one_claim_spreads_across_groups(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for group in ["a", "a", "a", "b", "b", "b"] {
        enqueue(&store, job("q").group(group)).await;
    }
    let groups: Vec<String> = claim(&store, "q", "w", 4)
        .await
        .into_iter()
        .map(|j| j.group)
        .collect();
    assert_eq!(groups, ["a", "b", "a", "b"]);
    let next: Vec<String> = claim(&store, "q", "w", 1)
        .await
        .into_iter()
        .map(|j| j.group)
        .collect();
    assert_eq!(next, ["a"], "a was served before b, so it is its turn");
}

pub async fn priority_orders_a_group(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let low = enqueue(&store, job("q").priority(0)).await;
    let high = enqueue(&store, job("q").priority(10)).await;
    let mid = enqueue(&store, job("q").priority(5)).await;
    let high2 = enqueue(&store, job("q").priority(10)).await;
    let other = enqueue(&store, job("q").group("other").priority(-5)).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(claim_one(&store, "q", "w").await.0.id);
    }
    // Turns first (default, other, default, …), then priority and age within a group.
    assert_eq!(order, [high.id, other.id, high2.id, mid.id, low.id]);
}

pub async fn paused_queue_gives_nothing(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("r")).await;
    store.pause("q").await.unwrap();
    store.pause("q").await.unwrap();
    store.pause("z").await.unwrap();
    assert!(claim(&store, "q", "w", 10).await.is_empty());
    assert_eq!(
        claim(&store, "r", "w", 10).await.len(),
        1,
        "other queues go on"
    );
    let counts = store.counts().await.unwrap();
    let paused: Vec<(&str, bool, u64)> = counts
        .iter()
        .map(|q| (q.queue.as_str(), q.paused, q.counts.total()))
        .collect();
    assert_eq!(paused, [("q", true, 2), ("r", false, 1), ("z", true, 0)]);

    store.resume("q").await.unwrap();
    assert_eq!(claim(&store, "q", "w", 10).await.len(), 2);
    assert!(matches!(
        store.pause("").await,
        Err(Error::Invalid { field: "queue", .. })
    ));
}
