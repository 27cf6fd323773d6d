//! Claim order: turns across tenants, then across a tenant's groups,
//! priority within a group, pause; jobs not yet due stay out of the way.

use std::collections::HashSet;
use std::time::Duration;

use sluice_jobs::{Error, JobId, JobStore};

use super::{Factory, T0, claim, claim_one, enqueue, job, open};

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

/// One claim of a queue with one tenant and one group (the claim's short
/// way, without a ranking) takes its jobs by priority, then age, then id,
/// and leaves those not yet due.
pub async fn one_group_claims_by_priority_then_age(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let secs = |n| T0 + Duration::from_secs(n);
    let low = enqueue(&store, job("q").priority(0)).await;
    // Due later than `high_old`, though stored first.
    let high_new = enqueue(&store, job("q").priority(10).run_at(secs(2))).await;
    let high_old = enqueue(&store, job("q").priority(10).run_at(secs(1))).await;
    let later = enqueue(&store, job("q").priority(99).run_at(secs(9))).await;
    let mid = enqueue(&store, job("q").priority(5)).await;
    let claim_ids = async || -> Vec<JobId> {
        let jobs = claim(&store, "q", "w", 10).await;
        jobs.into_iter().map(|j| j.id).collect()
    };
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        claim_ids().await,
        [high_old.id, high_new.id, mid.id, low.id]
    );
    clock.advance(Duration::from_secs(6));
    assert_eq!(claim_ids().await, [later.id], "due now");
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

/// Groups are the tenant's: two tenants that both use the default group
/// take separate turns, rather than one waiting behind the other's backlog.
pub async fn tenants_take_turns_in_a_shared_group_name(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for _ in 0..4 {
        enqueue(&store, job("q").tenant("acme")).await;
    }
    enqueue(&store, job("q").tenant("globex")).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(claim_one(&store, "q", "w").await.0.tenant);
    }
    assert_eq!(order, ["acme", "globex", "acme", "acme", "acme"]);
}

/// Tenants take turns before groups do: a tenant's many groups share its
/// one turn, so naming more groups does not take more of the queue.
pub async fn many_groups_share_one_tenant_turn(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for i in 0..6 {
        enqueue(&store, job("q").tenant("flood").group(format!("g{i}"))).await;
    }
    for _ in 0..3 {
        enqueue(&store, job("q").tenant("acme")).await;
    }
    let picked: Vec<(String, String)> = claim(&store, "q", "w", 6)
        .await
        .into_iter()
        .map(|j| (j.tenant, j.group))
        .collect();
    let want = [
        ("flood", "g0"),
        ("acme", "default"),
        ("flood", "g1"),
        ("acme", "default"),
        ("flood", "g2"),
        ("acme", "default"),
    ];
    assert_eq!(picked, want.map(|(t, g)| (t.to_owned(), g.to_owned())));
    let next = claim_one(&store, "q", "w").await.0;
    assert_eq!(
        (next.tenant.as_str(), next.group.as_str()),
        ("flood", "g3"),
        "acme has nothing left; flood's groups go on in turn"
    );
}

/// A tenant's batches of jobs scheduled a year out, each in a group of its
/// own, neither hide nor delay another tenant's due jobs; once their time
/// comes they are claimed like any other.
pub async fn future_jobs_stay_out_of_the_claims_way(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let later = T0 + Duration::from_secs(365 * 86_400);
    for batch in 0..3 {
        let jobs = (0..1_000)
            .map(|i| {
                job("q")
                    .tenant("flood")
                    .group(format!("g{batch}-{i}"))
                    .run_at(later)
            })
            .collect();
        store.enqueue_batch(jobs).await.unwrap();
    }
    let mut due = Vec::new();
    for i in 0..10 {
        due.push(
            enqueue(&store, job("q").tenant("acme").group(format!("a{}", i % 2)))
                .await
                .id,
        );
    }
    let mut got: Vec<JobId> = claim(&store, "q", "w", 20)
        .await
        .into_iter()
        .map(|j| j.id)
        .collect();
    got.sort_unstable();
    assert_eq!(got, due, "exactly the due jobs, every one of them");
    assert!(claim(&store, "q", "w", 20).await.is_empty());

    clock.set(later);
    let woke = claim(&store, "q", "w", 20).await;
    assert_eq!(woke.len(), 20, "their time came");
    assert!(woke.iter().all(|j| j.tenant == "flood"));
    let groups: HashSet<&str> = woke.iter().map(|j| j.group.as_str()).collect();
    assert_eq!(groups.len(), 20, "one job from each of 20 groups");
}
