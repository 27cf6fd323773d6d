//! Flows: the parent waits for its children, reads their results, fails
//! or goes on when one fails as its policy says, and takes its pending
//! children with it when cancelled, nested flows included.

use serde_json::json;
use sluice_jobs::flow::{ChildFailure, NewFlow};
use sluice_jobs::{AnyStore, Job, JobId, JobState, JobStore, RetryDecision};

use super::{Factory, claim, claim_one, job, open, state};

async fn complete(store: &AnyStore, j: &Job, result: serde_json::Value) {
    let lease = j.lease.clone().expect("leased");
    store.complete(&lease, result).await.expect("complete");
}

/// The parent is claimable only once both children completed, and reads
/// their results.
pub async fn the_parent_runs_after_its_children<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, _clock) = open(f).await;
    let store = AnyStore::from(store);
    let flow = NewFlow::new(job("q").tenant("acme"))
        .child(job("q").tenant("acme"))
        .child(job("q").tenant("acme"));
    let jobs = store.enqueue_flow(flow).await.expect("flow");
    assert_eq!(jobs.len(), 3);
    let parent = jobs[0].id;
    assert_eq!(jobs[0].state, JobState::Scheduled);
    assert_eq!(jobs[0].pending_children, 2);
    let claimed = claim(&store, "q", "w", 10).await;
    assert_eq!(claimed.len(), 2, "only the children are due");
    assert!(claimed.iter().all(|c| c.parent == Some(parent)));
    complete(&store, &claimed[0], json!({"part": 1})).await;
    let waiting = store.get(parent).await.unwrap().unwrap();
    assert_eq!(
        (waiting.state, waiting.pending_children),
        (JobState::Scheduled, 1)
    );
    assert!(claim(&store, "q", "w", 10).await.is_empty());
    complete(&store, &claimed[1], json!({"part": 2})).await;
    let (run, _) = claim_one(&store, "q", "w").await;
    assert_eq!(run.id, parent);
    let children = store.children(parent).await.expect("children");
    let results: Vec<_> = children.iter().map(|c| c.result.clone().unwrap()).collect();
    assert_eq!(results, [json!({"part": 1}), json!({"part": 2})]);
}

/// A dead child fails a `fail` parent (naming it) and counts as done for
/// an `ignore` parent.
pub async fn a_failed_child_fails_or_is_ignored<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, _clock) = open(f).await;
    let store = AnyStore::from(store);
    for policy in [ChildFailure::Fail, ChildFailure::Ignore] {
        let queue = policy.as_str();
        let flow = NewFlow::new(job(queue))
            .child(job(queue))
            .child(job(queue))
            .on_child_failure(policy);
        let parent = store.enqueue_flow(flow).await.expect("flow")[0].id;
        let claimed = claim(&store, queue, "w", 10).await;
        assert_eq!(claimed.len(), 2);
        let lease = claimed[0].lease.clone().unwrap();
        store
            .fail(&lease, "404", RetryDecision::Dead)
            .await
            .expect("dead");
        complete(&store, &claimed[1], json!(1)).await;
        let p = store.get(parent).await.unwrap().unwrap();
        match policy {
            ChildFailure::Fail => {
                assert_eq!(p.state, JobState::Dead);
                let error = p.last_error.unwrap_or_default();
                assert!(error.contains(&claimed[0].id.to_string()), "{error}");
            }
            ChildFailure::Ignore => assert_eq!(p.state, JobState::Available),
        }
    }
}

/// A flow nested in a flow: its parent waits for its own children, and
/// the outer parent for it. Cancelling the outer parent cancels every
/// descendant that has not started, at every depth.
pub async fn nested_flows_wait_and_cancel_down<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, _clock) = open(f).await;
    let store = AnyStore::from(store);
    let inner = NewFlow::new(job("inner"))
        .child(job("leaf"))
        .child(job("leaf"));
    let flow = NewFlow::new(job("outer"))
        .child(job("leaf"))
        .child_flow(inner);
    let jobs = store.enqueue_flow(flow).await.expect("flow");
    let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    // outer, leaf, inner, leaf, leaf
    assert_eq!(jobs[2].parent, Some(ids[0]));
    assert_eq!(jobs[3].parent, Some(ids[2]));
    for leaf in claim(&store, "leaf", "w", 10).await {
        complete(&store, &leaf, json!("ok")).await;
    }
    assert_eq!(
        state(&store, ids[2]).await,
        JobState::Available,
        "inner runs"
    );
    assert_eq!(
        state(&store, ids[0]).await,
        JobState::Scheduled,
        "outer waits"
    );
    let (inner_run, _) = claim_one(&store, "inner", "w").await;
    complete(&store, &inner_run, json!("merged")).await;
    assert_eq!(
        state(&store, ids[0]).await,
        JobState::Available,
        "outer runs"
    );

    // Cancelled from the top: every child not yet started goes with it.
    let inner = NewFlow::new(job("inner2"))
        .child(job("leaf2"))
        .child(job("leaf2"));
    let flow = NewFlow::new(job("outer2"))
        .child(job("leaf2"))
        .child_flow(inner);
    let jobs = store.enqueue_flow(flow).await.expect("flow");
    store.cancel(jobs[0].id).await.expect("cancel");
    for j in &jobs {
        assert_eq!(
            state(&store, j.id).await,
            JobState::Cancelled,
            "job {}",
            j.id
        );
    }

    // Bounds: a flow without children, a key on a child.
    assert!(store.enqueue_flow(NewFlow::new(job("q"))).await.is_err());
    let keyed = NewFlow::new(job("q")).child(job("q").idempotency_key("k"));
    assert!(store.enqueue_flow(keyed).await.is_err());
}
