//! The `[audit]` section: where the audit trail of administrative acts is
//! kept, and how many entries may wait to be written.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::jobs::{JobsConfig, StoreLocation};
use super::keys::WITH_JOBS;

/// Who changed what, when (`GET /v1/audit`, `sluice audit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Whether administrative acts are recorded (default true).
    pub enabled: bool,
    /// `"jobs"` (the file `{data_dir}/audit.db` beside SQLite jobs, or the
    /// job store's PostgreSQL), `"sqlite"` (`{data_dir}/audit.db`) or a
    /// `postgres://` URL.
    pub store: String,
    /// Entries waiting for the writer at most (seed: 1,000); past it they
    /// go to the spill file `{data_dir}/audit.spill.jsonl`, written to the
    /// store later. A request never waits for the audit trail.
    pub queue: usize,
    /// Entries older than this many days are deleted, checked hourly
    /// (default 365); 0 keeps them for ever.
    pub retention_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            store: WITH_JOBS.to_owned(),
            queue: sluice_audit::DEFAULT_QUEUE,
            retention_days: 365,
        }
    }
}

impl AuditConfig {
    /// Where the store lives, `data_dir` holding the SQLite file.
    pub fn location(&self, data_dir: &Path, jobs: &JobsConfig) -> StoreLocation {
        StoreLocation::beside_jobs(&self.store, data_dir, jobs, "audit.db")
    }

    /// The file entries go to when the queue is full or the store fails.
    pub fn spill_file(&self, data_dir: &Path) -> PathBuf {
        data_dir.join("audit.spill.jsonl")
    }
}
