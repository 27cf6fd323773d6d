//! What the store asks of its database, counted ([`sluice_jobs::Tally`]):
//! a batch, a claim and a batch of completions each cost a few statements
//! and one commit, not a statement per job. A change
//! that adds a statement per job, or a commit per cycle, fails here.

use serde_json::json;
use sluice_jobs::{JobStore, Tally};

use super::{Factory, LEASE, job, open};

pub async fn a_cycle_costs_the_same_for_any_number_of_jobs<F: Factory>(f: &F) {
    let (store, _clock) = open(f).await;
    let cost = |before: Tally| F::tally(&store) - before;
    for n in [3_usize, 300] {
        let before = F::tally(&store);
        let batch = (0..n).map(|_| job("q")).collect();
        store.enqueue_batch(batch).await.unwrap();
        let enqueue = cost(before);

        let before = F::tally(&store);
        let claimed = store.claim("q", "w", 1_000, LEASE).await.unwrap();
        assert_eq!(claimed.len(), n);
        let claim = cost(before);

        let before = F::tally(&store);
        let done = claimed
            .into_iter()
            .map(|j| (j.lease.unwrap(), json!(null)))
            .collect();
        let answers = store.complete_many(done).await.unwrap();
        assert!(answers.iter().all(Result::is_ok));
        let complete = cost(before);

        let tally = |statements, commits, synced_commits| Tally {
            statements,
            commits,
            synced_commits,
        };
        // One statement (PostgreSQL), or one per power-of-two chunk (SQLite).
        assert_eq!((enqueue.commits, enqueue.synced_commits), (1, 1));
        assert!(
            enqueue.statements >= 1 && enqueue.statements <= u64::from(n.count_ones()),
            "{n} jobs enqueued in {enqueue:?}"
        );
        // The promotion, the claim, and the tenants' and groups' turns;
        // not waiting for the disk.
        assert_eq!(claim, tally(4, 1, 0), "{n} jobs claimed");
        assert_eq!(complete, tally(1, 1, 1), "{n} jobs completed");
    }
}
