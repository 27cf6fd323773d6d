//! Counters of what the cache did, for metrics and the admin API.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use crate::Usage;

/// Models counted apart in [`CacheStats::models`]; hits on further model
/// names are added up under [`OTHER_MODELS`], so clients sending many
/// names cannot grow the map.
pub const MAX_MODELS_COUNTED: usize = 256;

/// The name under which hits beyond [`MAX_MODELS_COUNTED`] models count.
pub const OTHER_MODELS: &str = "(other)";

/// Hits and what they saved for one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ModelStats {
    /// Answers served from the cache.
    pub hits: u64,
    /// Input tokens that were not sent again.
    pub saved_prompt_tokens: u64,
    /// Output tokens that were not generated again.
    pub saved_completion_tokens: u64,
}

/// A snapshot of the cache's counters (since it was built) and size (now).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that found nothing (or only an expired entry).
    pub misses: u64,
    /// Requests not looked up: policy off, sampling, or the client said so.
    pub bypasses: u64,
    /// Answers stored.
    pub stores: u64,
    /// Answers refused: not a success, too large, or a stream that did not
    /// end properly.
    pub rejected: u64,
    /// Entries removed to stay within the byte bound (in memory; Redis
    /// evicts by its own `maxmemory` policy and is not counted here).
    pub evictions: u64,
    /// Entries removed because their TTL or idle time ran out (in memory;
    /// Redis expires keys itself and is not counted here).
    pub expirations: u64,
    /// Calls to a store outside the process (Redis) that failed or timed
    /// out: the lookup counted as a miss, the answer was not stored.
    pub store_errors: u64,
    /// Entries held in the shared store now.
    pub entries: u64,
    /// Bytes the shared store holds now (bodies, headers and overhead).
    pub bytes: u64,
    /// Sessions with remembered answers now.
    pub sessions: u64,
    /// Bytes the per-session store holds now.
    pub session_bytes: u64,
    /// Hits and saved tokens per model.
    pub models: BTreeMap<String, ModelStats>,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) hits: AtomicU64,
    pub(super) misses: AtomicU64,
    pub(super) bypasses: AtomicU64,
    pub(super) stores: AtomicU64,
    pub(super) rejected: AtomicU64,
    pub(super) evictions: AtomicU64,
    pub(super) expirations: AtomicU64,
    pub(super) store_errors: AtomicU64,
    models: Mutex<HashMap<String, ModelStats>>,
}

impl Counters {
    pub(super) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    pub(super) fn hit(&self, model: &str, usage: Option<Usage>) {
        Self::bump(&self.hits);
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        let name = if models.contains_key(model) || models.len() < MAX_MODELS_COUNTED {
            model
        } else {
            OTHER_MODELS
        };
        let stats = models.entry(name.to_owned()).or_default();
        stats.hits += 1;
        if let Some(usage) = usage {
            stats.saved_prompt_tokens = stats
                .saved_prompt_tokens
                .saturating_add(usage.prompt_tokens);
            stats.saved_completion_tokens = stats
                .saved_completion_tokens
                .saturating_add(usage.completion_tokens);
        }
    }

    /// The counters, with the sizes left for the caller to fill in.
    pub(super) fn snapshot(&self) -> CacheStats {
        let models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            bypasses: self.bypasses.load(Relaxed),
            stores: self.stores.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            expirations: self.expirations.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
            models: models.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            ..CacheStats::default()
        }
    }
}
