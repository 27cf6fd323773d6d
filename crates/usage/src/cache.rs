//! The response cache: the cheapest model call is the one never sent.
//!
//! An exact-match cache of whole answers, knowing nothing of HTTP servers:
//!
//! - [`CacheKey::for_request`] hashes a request in canonical form (key
//!   order, whitespace and number spelling do not matter; the fields in
//!   [`VOLATILE_FIELDS`] are left out), scoped by tenant or by a namespace
//!   shared on purpose ([`Scope`]).
//! - [`Policy::check`] says whether a request may be served from the cache:
//!   by default only `temperature` 0 or a `seed`, and embeddings always.
//! - [`ResponseCache`] holds answers in memory, bounded by bytes, with TTL
//!   and idle expiry, plus the last few answers of each session.
//! - [`StreamCapture`] assembles a streamed answer as it passes, for
//!   storing once it ends properly (never half), and [`replay_stream`]
//!   turns a stored answer back into a stream in the endpoint's format.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use sluice_usage::Endpoint;
//! use sluice_usage::cache::{Answer, CacheConfig, CacheKey, NewEntry, Policy, ResponseCache, Scope};
//!
//! let cache = ResponseCache::new(CacheConfig::default());
//! let scope = Scope::Tenant("acme".into());
//! let request = json!({"model": "gpt-4o-mini", "temperature": 0,
//!                      "messages": [{"role": "user", "content": "hi"}]});
//! assert!(Policy::Deterministic.check(Endpoint::Chat, &request).is_ok());
//!
//! let key = CacheKey::for_request(&scope, "openai", Endpoint::Chat, &request);
//! assert!(cache.lookup(&key, true, None).is_none());
//! let entry = cache.entry(NewEntry {
//!     scope: scope.clone(),
//!     model: "gpt-4o-mini".into(),
//!     answer: Answer::json(r#"{"choices":[]}"#),
//!     usage: None,
//!     ttl: None,
//! })?;
//! cache.insert(key, entry);
//!
//! // The same request, keys in another order and a `user` field: a hit.
//! let again = json!({"messages": [{"content": "hi", "role": "user"}],
//!                    "temperature": 0.0, "model": "gpt-4o-mini", "user": "bob"});
//! let key = CacheKey::for_request(&scope, "openai", Endpoint::Chat, &again);
//! assert!(cache.lookup(&key, true, None).is_some());
//! # Ok::<(), sluice_usage::cache::NotStored>(())
//! ```

mod backend;
mod capture;
mod entry;
mod key;
#[cfg(feature = "redis")]
mod redis;
mod replay;
mod rule;
mod session;
mod stats;
mod store;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use backend::{AnswerCache, CacheFuture};
pub use capture::{CaptureError, StreamCapture};
pub use entry::{Answer, ENTRY_OVERHEAD_BYTES, Entry, NewEntry, STORED_HEADERS};
pub use key::{CacheKey, Scope, VOLATILE_FIELDS};
#[cfg(feature = "redis")]
pub use redis::{InvalidRedisUrl, RECONNECT_AFTER, RedisCache, RedisCacheConfig};
pub use replay::{ReplayError, replay_stream};
pub use rule::{Bypass, Policy, is_deterministic};
pub use session::{InvalidSessionId, MAX_SESSION_ID_BYTES, SessionId};
pub use stats::{CacheStats, MAX_MODELS_COUNTED, ModelStats, OTHER_MODELS};
pub use store::{Hit, Invalidate, NotStored, ResponseCache};

/// How much the cache holds and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes the shared store may hold (bodies, kept headers and
    /// [`ENTRY_OVERHEAD_BYTES`] per entry). Default 64 MiB.
    pub max_bytes: u64,
    /// The largest single answer stored, in bytes. Default 4 MiB; at most
    /// `u32::MAX`.
    pub max_entry_bytes: u64,
    /// How long an answer is served after it was stored. Default 10 min.
    pub ttl: Duration,
    /// The longest TTL a request may ask for; longer ones are cut to it.
    /// Default 1 day.
    pub max_ttl: Duration,
    /// An entry not served for this long expires before its TTL. Default
    /// none.
    pub time_to_idle: Option<Duration>,
    /// Answers kept per session. Default 10; 0 turns the per-session
    /// cache off.
    pub session_entries: usize,
    /// Bytes the per-session store may hold. Default 16 MiB.
    pub max_session_bytes: u64,
}

/// [`CacheConfig::max_bytes`] by default: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// [`CacheConfig::max_entry_bytes`] by default: 4 MiB.
pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 4 << 20;
/// [`CacheConfig::ttl`] by default: 10 minutes.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// [`CacheConfig::max_ttl`] by default: one day.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(86_400);
/// [`CacheConfig::session_entries`] by default: 10, the seed's figure.
pub const DEFAULT_SESSION_ENTRIES: usize = 10;
/// [`CacheConfig::max_session_bytes`] by default: 16 MiB.
pub const DEFAULT_MAX_SESSION_BYTES: u64 = 16 << 20;

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_bytes: DEFAULT_MAX_BYTES,
            max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
            ttl: DEFAULT_TTL,
            max_ttl: DEFAULT_MAX_TTL,
            time_to_idle: None,
            session_entries: DEFAULT_SESSION_ENTRIES,
            max_session_bytes: DEFAULT_MAX_SESSION_BYTES,
        }
    }
}
