//! Settings every store shares.

use std::sync::Arc;
use std::time::Duration;

use sluice_store::{Clock, SystemClock};

/// Settings every store shares.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Where time comes from; the system clock by default.
    pub clock: Arc<dyn Clock>,
    /// How long an idempotency key deduplicates (the seed's 24 h).
    pub idempotency_ttl: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            idempotency_ttl: Duration::from_secs(86_400),
        }
    }
}

impl StoreConfig {
    /// Takes time from `clock`.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Deduplicates enqueues with the same key for `ttl`.
    #[must_use]
    pub fn idempotency_ttl(mut self, ttl: Duration) -> Self {
        self.idempotency_ttl = ttl;
        self
    }
}
