//! Tenants, API keys and tiers managed at run time, in the gateway: the
//! store `[keys]` names, opened at start-up, and the cache every key check
//! reads. A change made through the admin API drops the cached entry here
//! at once ([`KeyRegistry::changed`]).

use std::time::Duration;

use sluice_keys::{Change, KeyCache, KeyStore};

use crate::config::{Config, StoreLocation};
use crate::error::chain;
use crate::state::StartError;

/// The open key store and its cache.
#[derive(Debug, Clone)]
pub struct KeyRegistry {
    cache: KeyCache,
}

impl KeyRegistry {
    /// Opens the store `config.keys` names (creating the data directory
    /// for SQLite).
    ///
    /// # Errors
    /// [`StartError::Keys`] naming the file or URL (password hidden).
    pub async fn open(config: &Config) -> Result<KeyRegistry, StartError> {
        let k = &config.keys;
        let location = k.location(&config.data_dir, &config.jobs);
        let fail = |detail: String| StartError::Keys {
            store: location.display(),
            detail,
        };
        let store = match &location {
            StoreLocation::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
                }
                KeyStore::open(path).await
            }
            StoreLocation::Postgres(url) => KeyStore::connect(url).await,
        }
        .map_err(|e| fail(chain(&e)))?;
        let cache = KeyCache::with_ttls(
            store,
            Duration::from_secs(k.cache_ttl_seconds),
            Duration::from_secs(k.tier_cache_ttl_seconds),
        );
        Ok(KeyRegistry { cache })
    }

    /// The store.
    pub fn store(&self) -> &KeyStore {
        self.cache.store()
    }

    /// The cache key checks read.
    pub fn cache(&self) -> &KeyCache {
        &self.cache
    }

    /// Drops what `change` made stale.
    pub fn changed(&self, change: &Change) {
        self.cache.invalidate(change);
    }

    /// Closes the store's connections.
    pub async fn close(&self) {
        self.store().close().await;
    }
}
