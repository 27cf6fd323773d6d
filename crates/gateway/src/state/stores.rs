//! [`Stores`]: who may call (the configured keys and the key store) and
//! the job store: what the gateway keeps beyond a request.

use crate::jobs::Jobs;
use crate::keys::KeyRegistry;
use crate::keys::tokens::Keys;

/// The stores substate.
#[derive(Debug)]
pub(crate) struct Stores {
    /// Tenant keys and the operator's tokens from the config.
    pub(crate) keys: Keys,
    /// Tenants and keys managed at run time (`[keys] enabled`).
    pub(crate) keystore: Option<KeyRegistry>,
    /// The job store (`[jobs] enabled`).
    pub(crate) jobs: Option<Jobs>,
}

impl Stores {
    /// Whether no caller needs a key: no `[[tenants]]` and no tenant in
    /// the key store.
    pub(crate) fn is_open(&self) -> bool {
        self.keys.is_open() && !self.keystore.as_ref().is_some_and(KeyRegistry::has_tenants)
    }

    /// Closes the stores' connections.
    pub(crate) async fn close(&self) {
        if let Some(jobs) = &self.jobs {
            jobs.close().await;
        }
        if let Some(keys) = &self.keystore {
            keys.close().await;
        }
    }
}
