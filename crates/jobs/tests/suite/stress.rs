//! Concurrent claimers.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use sluice_jobs::{JobState, JobStore, ListFilter};
use tokio::task::JoinSet;

use super::{Factory, LEASE, job, open};

const JOBS: usize = 300;
const WORKERS: usize = 6;

pub async fn concurrent_claimers_never_share_a_job<F: Factory>(f: &F) {
    let (store, _clock) = open(f).await;
    let store = Arc::new(store);
    let batch = (0..JOBS)
        .map(|i| {
            job("q")
                .group(format!("g{}", i % 7))
                .priority((i % 3) as i32)
        })
        .collect();
    store.enqueue_batch(batch).await.unwrap();

    let mut workers = JoinSet::new();
    for w in 0..WORKERS {
        let store = Arc::clone(&store);
        workers.spawn(async move {
            let worker = format!("w{w}");
            let mut mine = Vec::new();
            loop {
                let jobs = store.claim("q", &worker, 4, LEASE).await.unwrap();
                if jobs.is_empty() {
                    // Empty can mean that the others hold what is left.
                    let left = ListFilter {
                        state: Some(JobState::Available),
                        limit: 1,
                        ..ListFilter::default()
                    };
                    if store.list(&left).await.unwrap().jobs.is_empty() {
                        return mine;
                    }
                    tokio::task::yield_now().await;
                    continue;
                }
                for claimed in jobs {
                    let lease = claimed.lease.clone().unwrap();
                    store.complete(&lease, json!(worker)).await.unwrap();
                    mine.push(claimed.id);
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = workers.join_next().await {
        all.extend(mine.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(
        (all.len(), unique.len()),
        (JOBS, JOBS),
        "every job claimed exactly once"
    );
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts[0].counts.completed, counts[0].counts.total()),
        (JOBS as u64, JOBS as u64)
    );
}
