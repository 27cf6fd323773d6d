//! How long finished jobs are kept.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long finished jobs are kept (the seed's: completed 1 h, dead 24 h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Completed jobs, after they finished.
    pub completed: Duration,
    /// Dead jobs, after they died.
    pub dead: Duration,
    /// Cancelled jobs, after they were cancelled.
    pub cancelled: Duration,
    /// Job events ([`crate::events`]), after they happened: how far back a
    /// reader of `GET /v1/jobs/events` can resume.
    #[serde(default = "default_events")]
    pub events: Duration,
}

fn default_events() -> Duration {
    Duration::from_secs(3_600)
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            completed: Duration::from_secs(3_600),
            dead: Duration::from_secs(86_400),
            cancelled: Duration::from_secs(86_400),
            events: default_events(),
        }
    }
}

/// What one [`JobStore::cleanup`](crate::JobStore::cleanup) deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // one field per thing deleted, named after it
pub struct Cleaned {
    pub completed: u64,
    pub dead: u64,
    pub cancelled: u64,
    pub expired_keys: u64,
    pub events: u64,
}
