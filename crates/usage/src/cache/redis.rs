//! The shared store in Redis, for gateway replicas that share one cache
//! (feature `redis`).
//!
//! # Key layout
//!
//! Each answer is one hash, `{prefix}cache:{key}` where `{key}` is the
//! [`CacheKey`]'s 64 hex digits (so a key prefix is a `SCAN MATCH`):
//!
//! | field | holds |
//! |---|---|
//! | `v` | the answer, LZ4-compressed (status, kept headers, usage, body) |
//! | `s` | its scope, `tenant:{name}` or `shared:{name}` |
//! | `m` | the model it answers for |
//! | `t` | when it was stored, in ms of the Redis server's clock |
//! | `l` | its TTL in ms |
//!
//! Redis expires the hash after its TTL, or after the idle limit when that
//! is shorter (renewed by each hit, never past the TTL). Ages are judged by
//! the server's clock, the one all replicas share, in Lua scripts that read
//! and write atomically.
//!
//! # Bounds
//!
//! An answer larger than `max_entry_bytes` (before compression) is never
//! written. Redis's memory as a whole is bounded by its own `maxmemory`:
//! every key here has a TTL, so `maxmemory-policy volatile-lru` (or
//! `allkeys-lru` on a Redis of its own) evicts the least recently used.
//!
//! Per-session answers stay in the process (see [`ResponseCache`]): a
//! session is usually served by one replica, and its answers are small.

mod codec;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};
use sluice_limit::{Clock, TokioClock};

use super::backend::{AnswerCache, CacheFuture};
use super::{
    CacheConfig, CacheKey, CacheStats, Entry, Hit, Invalidate, NewEntry, NotStored, ResponseCache,
    Scope, SessionId,
};

pub use crate::redis_link::RECONNECT_AFTER;
use crate::redis_link::RedisLink;

/// Keys examined per `SCAN` step of invalidation and stats.
const SCAN_COUNT: usize = 500;

/// Where the shared store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisCacheConfig {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// Put before every key (default `sluice:`).
    pub prefix: String,
    /// The longest one Redis call may take; past it the lookup is a miss.
    pub timeout: Duration,
}

impl RedisCacheConfig {
    /// Redis at `url`, prefix `sluice:`, calls of at most 250 ms.
    pub fn new(url: impl Into<String>) -> Self {
        RedisCacheConfig {
            url: url.into(),
            prefix: "sluice:".to_owned(),
            timeout: Duration::from_millis(250),
        }
    }
}

/// The Redis URL cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid redis url for the response cache")]
pub struct InvalidRedisUrl(#[source] redis::RedisError);

/// A response cache whose shared answers live in Redis, seen by every
/// replica with the same URL and prefix; per-session answers, counters
/// and the injected clock are this process's.
pub struct RedisCache {
    local: ResponseCache,
    link: RedisLink,
    prefix: String,
    get: Script,
    put: Script,
    invalidate: Script,
}

impl std::fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCache")
            .field("config", self.local.config())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisCache {
    /// A cache in Redis on tokio's clock. It connects on first use, so
    /// that a gateway starts while Redis is away (its lookups are misses
    /// until Redis is back).
    ///
    /// # Errors
    ///
    /// [`InvalidRedisUrl`] when `redis.url` cannot be parsed.
    pub fn new(config: CacheConfig, redis: RedisCacheConfig) -> Result<Self, InvalidRedisUrl> {
        Self::with_clock(config, redis, Arc::new(TokioClock))
    }

    /// The same, reading time from `clock` (for the session store and the
    /// reconnection pause; ages in Redis are the server's).
    ///
    /// # Errors
    ///
    /// [`InvalidRedisUrl`] when `redis.url` cannot be parsed.
    pub fn with_clock(
        config: CacheConfig,
        redis: RedisCacheConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, InvalidRedisUrl> {
        let link = RedisLink::new(&redis.url, redis.timeout, Arc::clone(&clock))
            .map_err(InvalidRedisUrl)?;
        Ok(RedisCache {
            local: ResponseCache::with_clock(config, clock),
            link,
            prefix: redis.prefix,
            get: Script::new(include_str!("redis/get.lua")),
            put: Script::new(include_str!("redis/put.lua")),
            invalidate: Script::new(include_str!("redis/invalidate.lua")),
        })
    }

    /// Connects (if not connected) and checks that Redis answers.
    ///
    /// # Errors
    ///
    /// Redis's error when it cannot be reached.
    pub async fn ping(&self) -> RedisResult<()> {
        self.link.ping().await
    }

    /// The Redis key of `key`'s entry.
    pub fn redis_key(&self, key: &CacheKey) -> String {
        format!("{}cache:{key}", self.prefix)
    }

    /// Runs `call` on the connection; a failure is counted (and is a miss).
    async fn call<T, F>(&self, call: impl FnOnce(MultiplexedConnection) -> F) -> Option<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let out = self.link.call(call).await;
        if out.is_none() {
            self.local.count_store_error();
        }
        out
    }

    fn idle_ms(&self) -> u64 {
        self.local.config().time_to_idle.map_or(0, millis)
    }

    /// The entry under `key` in Redis, if fresh and readable.
    async fn fetch(&self, key: &CacheKey) -> Option<Arc<Entry>> {
        let mut inv = self.get.key(self.redis_key(key));
        inv.arg(self.idle_ms());
        let found: Option<(Vec<u8>, u64, String, String, u64)> = self
            .call(|mut c| async move { inv.invoke_async(&mut c).await })
            .await?;
        let (value, age, scope, model, ttl) = found?;
        // An entry another writer damaged, or another version wrote, is a
        // miss; the next store of the same answer replaces it.
        let (answer, usage) = codec::decode(&value, self.local.config().max_entry_bytes).ok()?;
        let scope = parse_scope(&scope)?;
        let now = self.local.now();
        let age = Duration::from_millis(age);
        let stored_at = now.checked_sub(age).unwrap_or(now);
        let weight = u32::try_from(Entry::weigh(&answer, &model)).unwrap_or(u32::MAX);
        let new = NewEntry {
            scope,
            model,
            answer,
            usage,
            ttl: None,
        };
        let ttl = Duration::from_millis(ttl);
        Some(Arc::new(Entry::new(new, stored_at, ttl, weight)))
    }

    async fn store(&self, key: CacheKey, entry: Arc<Entry>) {
        let value = codec::encode(entry.answer(), entry.usage());
        let mut inv = self.put.key(self.redis_key(&key));
        inv.arg(value)
            .arg(entry.scope().to_string())
            .arg(entry.model())
            .arg(millis(entry.ttl()))
            .arg(self.idle_ms());
        let stored: Option<i64> = self
            .call(|mut c| async move { inv.invoke_async(&mut c).await })
            .await;
        if stored.is_some() {
            self.local.count_store();
        }
    }

    /// The names of entries in Redis whose key starts with `hex` (all
    /// when empty), a `SCAN` step at a time, until `each` has seen them
    /// all; `None` when a call failed.
    async fn scan<F>(&self, hex: &str, mut each: impl FnMut(Vec<String>) -> F) -> Option<()>
    where
        F: Future<Output = Option<()>>,
    {
        let pattern = format!("{}cache:{hex}*", self.prefix);
        let mut cursor = 0u64;
        loop {
            let pattern = pattern.as_str();
            let (next, keys): (u64, Vec<String>) = self
                .call(|mut c| async move {
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(SCAN_COUNT)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            if !keys.is_empty() {
                each(keys).await?;
            }
            if next == 0 {
                return Some(());
            }
            cursor = next;
        }
    }

    async fn remove(&self, filter: &Invalidate) -> u64 {
        let hex = match &filter.key_prefix {
            // A prefix that is not hex matches no key, as in memory.
            Some(p) if !p.bytes().all(|b| b.is_ascii_hexdigit()) => return 0,
            Some(p) => p.to_ascii_lowercase(),
            None => String::new(),
        };
        let scope = filter.scope.as_ref().map(Scope::to_string);
        let removed = std::sync::atomic::AtomicU64::new(0);
        let _ = self
            .scan(&hex, |keys| {
                let mut inv = self.invalidate.prepare_invoke();
                for k in keys {
                    inv.key(k);
                }
                inv.arg(if scope.is_some() { "1" } else { "0" })
                    .arg(scope.as_deref().unwrap_or(""))
                    .arg(if filter.model.is_some() { "1" } else { "0" })
                    .arg(filter.model.as_deref().unwrap_or(""));
                let removed = &removed;
                async move {
                    let n: u64 = self
                        .call(|mut c| async move { inv.invoke_async(&mut c).await })
                        .await?;
                    removed.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    Some(())
                }
            })
            .await;
        removed.into_inner()
    }

    /// Entries and their stored (compressed) bytes in Redis.
    async fn size(&self) -> Option<(u64, u64)> {
        let totals = std::sync::Mutex::new((0u64, 0u64));
        self.scan("", |keys| {
            let totals = &totals;
            async move {
                let mut pipe = redis::pipe();
                for k in &keys {
                    pipe.cmd("HSTRLEN").arg(k).arg("v");
                }
                let lens: Vec<u64> = self
                    .call(|mut c| async move { pipe.query_async(&mut c).await })
                    .await?;
                let mut t = totals.lock().unwrap_or_else(|e| e.into_inner());
                for len in lens.into_iter().filter(|&l| l > 0) {
                    t.0 += 1;
                    t.1 += len;
                }
                Some(())
            }
        })
        .await?;
        Some(totals.into_inner().unwrap_or_else(|e| e.into_inner()))
    }
}

impl AnswerCache for RedisCache {
    fn config(&self) -> &CacheConfig {
        self.local.config()
    }

    fn entry(&self, new: NewEntry) -> Result<Arc<Entry>, NotStored> {
        self.local.entry(new)
    }

    fn get<'a>(
        &'a self,
        key: &'a CacheKey,
        in_store: bool,
        session: Option<&'a SessionId>,
    ) -> CacheFuture<'a, Option<Hit>> {
        Box::pin(async move {
            let stored = if in_store {
                self.fetch(key).await
            } else {
                None
            };
            self.local.served(stored, key, session, self.local.now())
        })
    }

    fn peek<'a>(&'a self, key: &'a CacheKey) -> CacheFuture<'a, Option<Hit>> {
        Box::pin(async move {
            let entry = self.fetch(key).await?;
            Some(Hit {
                age: entry.age(self.local.now()),
                entry,
                from_session: false,
            })
        })
    }

    fn put(&self, key: CacheKey, entry: Arc<Entry>) -> CacheFuture<'_, ()> {
        Box::pin(self.store(key, entry))
    }

    fn remember(&self, session: &SessionId, key: CacheKey, entry: Arc<Entry>) {
        self.local.remember(session, key, entry);
    }

    fn invalidate<'a>(&'a self, filter: &'a Invalidate) -> CacheFuture<'a, u64> {
        Box::pin(async move { self.remove(filter).await + self.local.invalidate_sessions(filter) })
    }

    fn stats(&self) -> CacheFuture<'_, CacheStats> {
        Box::pin(async move {
            let mut stats = self.local.stats();
            // What Redis holds, not this process's unused memory store;
            // left at zero (and counted as an error) when Redis is away.
            match self.size().await {
                Some((entries, bytes)) => (stats.entries, stats.bytes) = (entries, bytes),
                None => {
                    (stats.entries, stats.bytes) = (0, 0);
                    stats.store_errors = self.local.stats().store_errors;
                }
            }
            stats
        })
    }

    fn record_bypass(&self) {
        self.local.record_bypass();
    }

    fn record_miss(&self) {
        self.local.record_miss();
    }
}

/// `tenant:acme` or `shared:docs` back into a [`Scope`].
fn parse_scope(s: &str) -> Option<Scope> {
    match s.split_once(':')? {
        ("tenant", name) => Some(Scope::Tenant(name.to_owned())),
        ("shared", name) => Some(Scope::Shared(name.to_owned())),
        _ => None,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
