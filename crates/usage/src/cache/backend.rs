//! One interface to the response cache wherever its shared answers live:
//! in this process ([`ResponseCache`]) or in Redis for replicas that share
//! one cache (`RedisCache`, feature `redis`). The gateway holds an
//! `Arc<dyn AnswerCache>` and does not know which.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{
    CacheConfig, CacheKey, CacheStats, Entry, Hit, Invalidate, NewEntry, NotStored, ResponseCache,
    SessionId,
};

/// What [`AnswerCache`]'s calls return: a boxed future, so that the trait
/// can be used as `dyn AnswerCache`.
pub type CacheFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A response cache: a shared store of answers by [`CacheKey`] and a
/// per-session store of each session's last answers.
///
/// A store outside the process that fails never fails a request: a lookup
/// is then a miss and an answer is not stored, and both are counted in
/// [`CacheStats::store_errors`].
pub trait AnswerCache: Send + Sync + fmt::Debug {
    /// Its configuration.
    fn config(&self) -> &CacheConfig;

    /// Checks and stamps an answer for [`AnswerCache::put`] and
    /// [`AnswerCache::remember`].
    ///
    /// # Errors
    ///
    /// [`NotStored`] when the answer is not a success or is larger than
    /// `max_entry_bytes`.
    fn entry(&self, new: NewEntry) -> Result<Arc<Entry>, NotStored>;

    /// Looks `key` up in the shared store (when `in_store`), then in the
    /// session's answers (when `session` is given), counting a hit or a
    /// miss.
    fn get<'a>(
        &'a self,
        key: &'a CacheKey,
        in_store: bool,
        session: Option<&'a SessionId>,
    ) -> CacheFuture<'a, Option<Hit>>;

    /// The shared store's entry for `key`, if fresh, without counting a
    /// hit or a miss: for a second look by a request that already missed
    /// (an identical request may have stored its answer meanwhile).
    fn peek<'a>(&'a self, key: &'a CacheKey) -> CacheFuture<'a, Option<Hit>>;

    /// Stores `entry` in the shared store under `key`.
    fn put(&self, key: CacheKey, entry: Arc<Entry>) -> CacheFuture<'_, ()>;

    /// Adds `entry` to the session's last answers.
    fn remember(&self, session: &SessionId, key: CacheKey, entry: Arc<Entry>);

    /// Removes the entries `filter` matches and returns how many.
    fn invalidate<'a>(&'a self, filter: &'a Invalidate) -> CacheFuture<'a, u64>;

    /// The counters and sizes now.
    fn stats(&self) -> CacheFuture<'_, CacheStats>;

    /// Counts a request that was not looked up.
    fn record_bypass(&self);

    /// Counts a miss that skipped the lookup (the client's `refresh`).
    fn record_miss(&self);
}

impl AnswerCache for ResponseCache {
    fn config(&self) -> &CacheConfig {
        ResponseCache::config(self)
    }

    fn entry(&self, new: NewEntry) -> Result<Arc<Entry>, NotStored> {
        ResponseCache::entry(self, new)
    }

    fn get<'a>(
        &'a self,
        key: &'a CacheKey,
        in_store: bool,
        session: Option<&'a SessionId>,
    ) -> CacheFuture<'a, Option<Hit>> {
        let hit = self.lookup(key, in_store, session);
        Box::pin(std::future::ready(hit))
    }

    fn peek<'a>(&'a self, key: &'a CacheKey) -> CacheFuture<'a, Option<Hit>> {
        Box::pin(std::future::ready(ResponseCache::peek(self, key)))
    }

    fn put(&self, key: CacheKey, entry: Arc<Entry>) -> CacheFuture<'_, ()> {
        self.insert(key, entry);
        Box::pin(std::future::ready(()))
    }

    fn remember(&self, session: &SessionId, key: CacheKey, entry: Arc<Entry>) {
        ResponseCache::remember(self, session, key, entry);
    }

    fn invalidate<'a>(&'a self, filter: &'a Invalidate) -> CacheFuture<'a, u64> {
        Box::pin(std::future::ready(ResponseCache::invalidate(self, filter)))
    }

    fn stats(&self) -> CacheFuture<'_, CacheStats> {
        Box::pin(std::future::ready(ResponseCache::stats(self)))
    }

    fn record_bypass(&self) {
        ResponseCache::record_bypass(self);
    }

    fn record_miss(&self) {
        ResponseCache::record_miss(self);
    }
}
