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
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            completed: Duration::from_secs(3_600),
            dead: Duration::from_secs(86_400),
            cancelled: Duration::from_secs(86_400),
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
}
