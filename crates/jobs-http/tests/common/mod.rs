//! Helpers shared by the tests of the kinds.

#![allow(dead_code)] // each test binary uses a part

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

/// Limits for the APIs the tests call: the gateway's seed numbers
/// (`crates/gateway/src/config/defaults.rs`), 2/s burst 5 for any other.
pub fn api_rules() -> Rules {
    Rules::new()
        .exact("api:github", Limit::per_second(5).burst(15))
        .exact("api:linear", Limit::per_second(3).burst(10))
        .exact("api:slack", Limit::per_second(3).burst(10))
        .prefix("api:", Limit::per_second(2).burst(5))
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

/// An HTTP client for handlers. In a workspace build reqwest may carry the
/// gateway's `rustls-no-provider` feature, so a provider is installed first.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
