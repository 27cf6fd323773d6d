//! Helpers shared by the worker tests.

#![allow(dead_code)] // each test binary uses a part

pub mod remote;

use std::future::Future;
use std::time::Duration;

use sluice_jobs::worker::{Backoff, PoolConfig};
use sluice_jobs::{JobState, JobStore, SqliteStore, StoreConfig};
pub use sluice_limit::Limiter;

/// Re-exported so tests need not name the limiter crate.
#[allow(unused_imports)] // not every test binary uses both
pub use sluice_limit::{Limit, Rules};

/// A private in-memory SQLite store on the system clock.
pub async fn sqlite() -> SqliteStore {
    SqliteStore::in_memory(StoreConfig::default())
        .await
        .expect("open an in-memory store")
}

/// A limiter with no rules: queues configure their own resources.
pub fn limiter() -> Limiter {
    Limiter::new(Rules::new()).expect("a limiter")
}

/// Short timings so tests run quickly: 10 ms polls, 5–40 ms backoff.
pub fn fast(config: &mut PoolConfig) {
    config.poll = Duration::from_millis(10);
    config.backoff = Backoff {
        base: Duration::from_millis(5),
        max: Duration::from_millis(40),
    };
}

/// Waits (up to a generous 60 s) until `done` holds, polling.
pub async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How many jobs of `queue` are in `state`.
pub async fn count(store: &impl JobStore, queue: &str, state: JobState) -> u64 {
    store
        .counts()
        .await
        .expect("counts")
        .into_iter()
        .find(|q| q.queue == queue)
        .map_or(0, |q| q.counts.get(state))
}
