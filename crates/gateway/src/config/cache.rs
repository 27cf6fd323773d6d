//! The `[cache]` section: the response cache (see docs/cache.md).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_usage::cache::{self, CacheConfig, Policy};

/// The most answers a session keeps.
pub(crate) const MAX_SESSION_ENTRIES: usize = 1_000;

/// The longest TTL that may be configured: 30 days.
pub(crate) const MAX_TTL_SECONDS: u64 = 30 * 86_400;

/// `[cache]`: answers to repeated requests served without a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSettings {
    /// Whether the cache answers at all.
    pub enabled: bool,
    /// When a model's answers are cached, unless `[cache.models]` says
    /// otherwise: `deterministic` (`temperature` 0 or a `seed`;
    /// embeddings always), `always` or `off`.
    pub policy: Policy,
    /// Bytes the shared store holds at most (bodies, kept headers and a
    /// fixed overhead per entry).
    pub max_bytes: u64,
    /// The largest single answer stored, in bytes.
    pub max_entry_bytes: u64,
    /// How long an answer is served after it was stored.
    pub ttl_seconds: u64,
    /// The longest TTL a request may ask for with `x-sluice-cache-ttl`.
    pub max_ttl_seconds: u64,
    /// An answer not served for this long expires before its TTL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// Answers kept per session (`x-sluice-session`); 0 turns the
    /// per-session cache off.
    pub session_entries: usize,
    /// Bytes the per-session store holds at most.
    pub max_session_bytes: u64,
    /// Whether the shared store is in Redis (the `[redis]` section's URL
    /// and prefix), seen by every replica, rather than in this process.
    pub redis: bool,
    /// Per-model settings by model prefix (`"openai/gpt-4o"`, `"openai/"`);
    /// the longest prefix wins.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelCache>,
    /// APIs whose proxied GETs are cached, by API name: an opt-in, since
    /// only the owner knows that a GET there is idempotent.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub apis: BTreeMap<String, ApiCache>,
    /// Namespaces shared on purpose: name → tenants whose entries are
    /// seen by each other. A tenant is in one namespace at most.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Vec<String>>,
}

/// `[cache.models."{prefix}"]`: one model's (or prefix's) cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelCache {
    /// Its policy; the section's `policy` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// Its TTL; the section's `ttl_seconds` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

/// `[cache.apis.{name}]`: an API whose proxied GETs are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiCache {
    /// Its TTL; the section's `ttl_seconds` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

impl Default for CacheSettings {
    /// On, deterministic requests only, 64 MiB of answers of at most
    /// 4 MiB each for 10 minutes (1 day at most), the last 10 answers of
    /// each session, in this process.
    fn default() -> Self {
        let c = CacheConfig::default();
        CacheSettings {
            enabled: true,
            policy: Policy::Deterministic,
            max_bytes: c.max_bytes,
            max_entry_bytes: c.max_entry_bytes,
            ttl_seconds: c.ttl.as_secs(),
            max_ttl_seconds: c.max_ttl.as_secs(),
            idle_seconds: c.time_to_idle.map(|d| d.as_secs()),
            session_entries: c.session_entries,
            max_session_bytes: c.max_session_bytes,
            redis: false,
            models: BTreeMap::new(),
            apis: BTreeMap::new(),
            namespaces: BTreeMap::new(),
        }
    }
}

/// What the cache does for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelRule {
    /// When its answers are cached.
    pub policy: Policy,
    /// How long they are served.
    pub ttl: Duration,
}

impl CacheSettings {
    /// The store's bounds and times.
    pub fn store_config(&self) -> CacheConfig {
        CacheConfig {
            max_bytes: self.max_bytes,
            max_entry_bytes: self.max_entry_bytes,
            ttl: Duration::from_secs(self.ttl_seconds),
            max_ttl: Duration::from_secs(self.max_ttl_seconds),
            time_to_idle: self.idle_seconds.map(Duration::from_secs),
            session_entries: self.session_entries,
            max_session_bytes: self.max_session_bytes,
        }
    }

    /// The policy and TTL for `model`: its longest prefix in `models`,
    /// else the section's own; `off` for every model when the cache is
    /// disabled.
    pub fn for_model(&self, model: &str) -> ModelRule {
        let own = self
            .models
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, m)| *m)
            .unwrap_or_default();
        let policy = if self.enabled {
            own.policy.unwrap_or(self.policy)
        } else {
            Policy::Off
        };
        ModelRule {
            policy,
            ttl: Duration::from_secs(own.ttl_seconds.unwrap_or(self.ttl_seconds)),
        }
    }

    /// How long GETs proxied to `api` are cached, if they are.
    pub fn for_api(&self, api: &str) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        let own = self.apis.get(api)?;
        Some(Duration::from_secs(
            own.ttl_seconds.unwrap_or(self.ttl_seconds),
        ))
    }

    /// Whose entries `tenant` sees: its namespace's, or its own.
    pub fn scope(&self, tenant: &str) -> cache::Scope {
        self.namespaces
            .iter()
            .find(|(_, tenants)| tenants.iter().any(|t| t == tenant))
            .map_or_else(
                || cache::Scope::Tenant(tenant.to_owned()),
                |(name, _)| cache::Scope::Shared(name.clone()),
            )
    }
}
