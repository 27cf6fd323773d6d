//! The gateway's pools, by name.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Bulkhead, BulkheadPermit, PoolConfig};
use crate::Error;

/// The gateway's pools by name, with a `default` pool for unknown names.
#[derive(Clone)]
pub struct Bulkheads {
    pools: BTreeMap<Arc<str>, Bulkhead>,
    fallback: Bulkhead,
}

impl Bulkheads {
    /// The name of the pool unknown names fall back to.
    pub const DEFAULT_POOL: &str = "default";

    /// Pools from configuration. A `default` pool is added with
    /// [`PoolConfig::DEFAULT`] if none is given.
    pub fn new(pools: impl IntoIterator<Item = (String, PoolConfig)>) -> Self {
        let mut pools: BTreeMap<Arc<str>, Bulkhead> = pools
            .into_iter()
            .map(|(name, config)| {
                let name: Arc<str> = name.into();
                (Arc::clone(&name), Bulkhead::new(name, config))
            })
            .collect();
        let fallback = pools
            .entry(Self::DEFAULT_POOL.into())
            .or_insert_with(|| Bulkhead::new(Self::DEFAULT_POOL, PoolConfig::DEFAULT))
            .clone();
        Bulkheads { pools, fallback }
    }

    /// The pool named `name`, or the `default` pool.
    pub fn get(&self, name: &str) -> &Bulkhead {
        self.pools.get(name).unwrap_or(&self.fallback)
    }

    /// [`Bulkhead::acquire`] on the pool named `name` (or `default`).
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`].
    pub async fn acquire(&self, name: &str, deadline: Instant) -> Result<BulkheadPermit, Error> {
        self.get(name).acquire(deadline).await
    }

    /// Every pool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Bulkhead> {
        self.pools.values()
    }

    /// Closes every pool.
    pub fn close(&self) {
        self.pools.values().for_each(Bulkhead::close);
    }
}

impl Default for Bulkheads {
    /// `model`, `api` and `default`, sized as [`PoolConfig`]'s constants say.
    fn default() -> Self {
        Bulkheads::new([
            ("model".to_owned(), PoolConfig::MODEL),
            ("api".to_owned(), PoolConfig::API),
            (Self::DEFAULT_POOL.to_owned(), PoolConfig::DEFAULT),
        ])
    }
}

impl fmt::Debug for Bulkheads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.pools.values()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_have_the_three_pools() {
        let b = Bulkheads::default();
        assert_eq!(b.get("model").stats().max_concurrent, 64);
        assert_eq!(b.get("api").stats().max_concurrent, 32);
        assert_eq!(b.get("default").stats().max_concurrent, 16);
        assert_eq!(b.get("unknown").name(), "default");
    }

    #[test]
    fn a_default_pool_is_always_there() {
        let b = Bulkheads::new([("model".to_owned(), PoolConfig::new(2, 0))]);
        assert_eq!(b.get("api").name(), "default");
        assert_eq!(b.iter().count(), 2);
    }
}
