//! The in-memory store: moka caches bounded by bytes, with TTL and idle
//! expiry judged by the injected clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::notification::RemovalCause;
use moka::sync::Cache;
use sluice_limit::{Clock, TokioClock};

use super::session::SessionLru;
use super::stats::Counters;
use super::{CacheConfig, CacheKey, CacheStats, Entry, NewEntry, Scope, SessionId};

/// Why an answer was not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotStored {
    /// Only successful answers are stored.
    #[error("status {0} is not stored, only 200")]
    Status(u16),
    /// Larger than the cache's `max_entry_bytes`.
    #[error("answer of {bytes} bytes is larger than the cache's max_entry_bytes {max}")]
    TooLarge {
        /// What the entry weighs.
        bytes: u64,
        /// The largest entry allowed.
        max: u64,
    },
}

/// Which entries [`ResponseCache::invalidate`] removes: those matching all
/// the fields that are set (all entries when none is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invalidate {
    /// Only this scope's entries.
    pub scope: Option<Scope>,
    /// Only answers for this model.
    pub model: Option<String>,
    /// Only keys whose hex form starts with this.
    pub key_prefix: Option<String>,
}

impl Invalidate {
    pub(super) fn matches(&self, key: &CacheKey, entry: &Entry) -> bool {
        self.scope.as_ref().is_none_or(|s| *s == entry.scope)
            && self.model.as_deref().is_none_or(|m| m == entry.model)
            && self
                .key_prefix
                .as_deref()
                .is_none_or(|p| key.has_hex_prefix(p))
    }
}

/// A hit: the entry and how old it is.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The stored answer.
    pub entry: Arc<Entry>,
    /// Its age (the `age` response header).
    pub age: Duration,
    /// Whether it came from the session's own answers rather than the
    /// shared store.
    pub from_session: bool,
}

/// The response cache: a shared store of answers keyed by [`CacheKey`] and
/// a per-session store of each session's last answers.
#[derive(Clone)]
pub struct ResponseCache {
    config: CacheConfig,
    store: Cache<CacheKey, Arc<Entry>>,
    sessions: Cache<SessionId, Arc<SessionLru>>,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseCache")
            .field("config", &self.config)
            .field("entries", &self.store.entry_count())
            .finish_non_exhaustive()
    }
}

/// moka's own expiry, which reclaims memory; whether an entry may still be
/// served is decided by [`Entry::is_fresh`] with the injected clock.
struct PerEntryTtl;

impl moka::Expiry<CacheKey, Arc<Entry>> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _: &CacheKey,
        entry: &Arc<Entry>,
        _: Instant,
    ) -> Option<Duration> {
        Some(entry.ttl)
    }
}

impl ResponseCache {
    /// A cache on tokio's clock (paused in tests with paused time).
    pub fn new(config: CacheConfig) -> Self {
        Self::with_clock(config, Arc::new(TokioClock))
    }

    /// A cache that reads time from `clock`.
    pub fn with_clock(config: CacheConfig, clock: Arc<dyn Clock>) -> Self {
        let counters = Arc::new(Counters::default());
        let listener = Arc::clone(&counters);
        let mut store = Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(|_: &CacheKey, e: &Arc<Entry>| e.weight())
            .expire_after(PerEntryTtl)
            .eviction_listener(move |_, _, cause| match cause {
                RemovalCause::Size => Counters::bump(&listener.evictions),
                RemovalCause::Expired => Counters::bump(&listener.expirations),
                RemovalCause::Explicit | RemovalCause::Replaced => {}
            });
        if let Some(idle) = config.time_to_idle {
            store = store.time_to_idle(idle);
        }
        let sessions = Cache::builder()
            .max_capacity(config.max_session_bytes)
            .weigher(|_: &SessionId, s: &Arc<SessionLru>| s.weight())
            .time_to_idle(config.max_ttl)
            .build();
        ResponseCache {
            config,
            store: store.build(),
            sessions,
            clock,
            counters,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Now, on the cache's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Checks and stamps an answer for storing with [`ResponseCache::insert`]
    /// and [`ResponseCache::remember`].
    ///
    /// # Errors
    ///
    /// [`NotStored`] when the answer is not a success or is larger than
    /// `max_entry_bytes`; it is counted as rejected.
    pub fn entry(&self, new: NewEntry) -> Result<Arc<Entry>, NotStored> {
        let checked = if new.answer.status != 200 {
            Err(NotStored::Status(new.answer.status))
        } else {
            let bytes = Entry::weigh(&new.answer, &new.model);
            let max = self.config.max_entry_bytes;
            match u32::try_from(bytes) {
                Ok(weight) if bytes <= max => Ok(weight),
                _ => Err(NotStored::TooLarge { bytes, max }),
            }
        };
        let weight = checked.inspect_err(|_| Counters::bump(&self.counters.rejected))?;
        let ttl = new.ttl.unwrap_or(self.config.ttl).min(self.config.max_ttl);
        Ok(Arc::new(Entry::new(new, self.now(), ttl, weight)))
    }

    /// Stores `entry` in the shared store under `key`.
    pub fn insert(&self, key: CacheKey, entry: Arc<Entry>) {
        Counters::bump(&self.counters.stores);
        self.store.insert(key, entry);
    }

    /// Adds `entry` to the session's last answers, dropping the oldest
    /// beyond `session_entries` and those that expired.
    pub fn remember(&self, session: &SessionId, key: CacheKey, entry: Arc<Entry>) {
        if self.config.session_entries == 0 {
            return;
        }
        let now = self.now();
        let idle = self.config.time_to_idle;
        let capacity = self.config.session_entries;
        self.sessions.entry(session.clone()).and_upsert_with(|old| {
            let fresh = |e: &Entry| e.is_fresh(now, idle);
            Arc::new(match old {
                Some(old) => old.into_value().with(key, entry, capacity, fresh),
                None => SessionLru::default().with(key, entry, capacity, fresh),
            })
        });
    }

    /// Looks `key` up in the shared store (when `in_store`) and in the
    /// session's answers (when `session` is given), and counts a hit or a
    /// miss. An expired entry is removed and is a miss.
    pub fn lookup(
        &self,
        key: &CacheKey,
        in_store: bool,
        session: Option<&SessionId>,
    ) -> Option<Hit> {
        let now = self.now();
        let stored = in_store.then(|| self.stored(key, now)).flatten();
        self.served(stored, key, session, now)
    }

    /// The shared store's fresh entry for `key`, counting nothing.
    pub fn peek(&self, key: &CacheKey) -> Option<Hit> {
        let now = self.now();
        let entry = self.stored(key, now)?;
        Some(Hit {
            age: entry.age(now),
            entry,
            from_session: false,
        })
    }

    /// The answer found in the shared store (`stored`), else the one in
    /// the session's answers, counted as a hit; or a miss.
    pub(super) fn served(
        &self,
        stored: Option<Arc<Entry>>,
        key: &CacheKey,
        session: Option<&SessionId>,
        now: Instant,
    ) -> Option<Hit> {
        let hit = stored
            .map(|entry| (entry, false))
            .or_else(|| Some((self.session_entry(session?, key, now)?, true)));
        let Some((entry, from_session)) = hit else {
            Counters::bump(&self.counters.misses);
            return None;
        };
        entry.touch(now);
        self.counters.hit(&entry.model, entry.usage);
        Some(Hit {
            age: entry.age(now),
            entry,
            from_session,
        })
    }

    /// Counts an answer stored elsewhere (in Redis).
    #[cfg(feature = "redis")]
    pub(super) fn count_store(&self) {
        Counters::bump(&self.counters.stores);
    }

    /// Counts a call to a store elsewhere that failed.
    #[cfg(feature = "redis")]
    pub(super) fn count_store_error(&self) {
        Counters::bump(&self.counters.store_errors);
    }

    /// Removes the matching entries of every session only.
    pub(super) fn invalidate_sessions(&self, filter: &Invalidate) -> u64 {
        let mut removed = 0;
        for (session, lru) in &self.sessions {
            if filter.scope.as_ref().is_some_and(|s| s != session.scope()) {
                continue;
            }
            let (kept, dropped) = lru.without(|k, e| filter.matches(k, e));
            if dropped > 0 {
                removed += dropped;
                self.sessions.insert((*session).clone(), Arc::new(kept));
            }
        }
        removed
    }

    fn stored(&self, key: &CacheKey, now: Instant) -> Option<Arc<Entry>> {
        let entry = self.store.get(key)?;
        if entry.is_fresh(now, self.config.time_to_idle) {
            return Some(entry);
        }
        // Expired by our clock before moka's noticed: gone now, and counted
        // once (moka reports an explicit removal, which it does not count).
        if self.store.remove(key).is_some() {
            Counters::bump(&self.counters.expirations);
        }
        None
    }

    fn session_entry(
        &self,
        session: &SessionId,
        key: &CacheKey,
        now: Instant,
    ) -> Option<Arc<Entry>> {
        let lru = self.sessions.get(session)?;
        let entry = lru.get(key)?;
        if entry.is_fresh(now, self.config.time_to_idle) {
            return Some(entry);
        }
        lru.remove(key);
        None
    }

    /// Counts a request that was not looked up (policy off, sampling, or
    /// the client's `off`).
    pub fn record_bypass(&self) {
        Counters::bump(&self.counters.bypasses);
    }

    /// Counts a miss that skipped the lookup (the client's `refresh`).
    pub fn record_miss(&self) {
        Counters::bump(&self.counters.misses);
    }

    /// Removes the entries `filter` matches, from the shared store and from
    /// every session, and returns how many it removed.
    pub fn invalidate(&self, filter: &Invalidate) -> u64 {
        let mut removed = 0;
        for (key, entry) in &self.store {
            if filter.matches(&key, &entry) && self.store.remove(&*key).is_some() {
                removed += 1;
            }
        }
        removed + self.invalidate_sessions(filter)
    }

    /// The counters and the sizes now (after moka's pending upkeep, so the
    /// sizes are exact).
    pub fn stats(&self) -> CacheStats {
        self.store.run_pending_tasks();
        self.sessions.run_pending_tasks();
        let mut stats = self.counters.snapshot();
        stats.entries = self.store.entry_count();
        stats.bytes = self.store.weighted_size();
        stats.sessions = self.sessions.entry_count();
        stats.session_bytes = self.sessions.weighted_size();
        stats
    }

    /// How many answers the session holds now.
    pub fn session_len(&self, session: &SessionId) -> usize {
        self.sessions.get(session).map_or(0, |lru| lru.len())
    }
}
