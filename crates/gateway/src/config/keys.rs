//! The `[keys]` section: where tenants, API keys and tiers managed at run
//! time are stored, and how long key checks are cached.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::jobs::{JobsConfig, StoreLocation};

/// `store` for "wherever the job store is".
pub const WITH_JOBS: &str = "jobs";

/// Tenants, keys and tiers managed through the admin API
/// (`/v1/tenants`, `/v1/keys`, `/v1/tiers`) and `sluice keys`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeysConfig {
    /// Whether the key store opens (default true).
    pub enabled: bool,
    /// `"jobs"` (the file `{data_dir}/keys.db` beside SQLite jobs, or the
    /// job store's PostgreSQL), `"sqlite"` (`{data_dir}/keys.db`) or a
    /// `postgres://` URL.
    pub store: String,
    /// How long a key or tenant is cached (seed: 60 s). A change made
    /// through this gateway, or heard on the Redis bus, drops it at once.
    pub cache_ttl_seconds: u64,
    /// How long a tier is cached (seed: 1 h).
    pub tier_cache_ttl_seconds: u64,
}

impl Default for KeysConfig {
    fn default() -> Self {
        KeysConfig {
            enabled: true,
            store: WITH_JOBS.to_owned(),
            cache_ttl_seconds: 60,
            tier_cache_ttl_seconds: 3_600,
        }
    }
}

impl KeysConfig {
    /// Where the store lives, `data_dir` holding the SQLite file.
    pub fn location(&self, data_dir: &Path, jobs: &JobsConfig) -> StoreLocation {
        StoreLocation::beside_jobs(&self.store, data_dir, jobs, "keys.db")
    }
}
