//! Tenants, API keys and tiers managed at run time, in the gateway: the
//! store `[keys]` names, opened at start-up; the cache every key check
//! reads; and the per-key and per-tenant limits, enforced by the request
//! path's own limiter (so in Redis when distributed) before the
//! provider's.
//!
//! A change made through the admin API drops the cached entry here at
//! once and, with `[redis]`, is announced on the bus
//! ([`sluice_redis::RedisLimiter::publish_notice`]) so that every other
//! replica drops it too: a revoked key is refused everywhere as soon as
//! the notice arrives (milliseconds), not after the cache's TTL. A replica
//! whose bus reconnects drops its whole cache, since notices sent while
//! it was away are lost.
//!
//! The keys the configuration names (`[[tenants]]` keys, the operator's
//! tokens) are [`tokens`].

mod limits;
pub(crate) mod tokens;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_keys::{AuthError, Caller, Change, KeyCache, KeyStore, Refusal};
use sluice_limit::Limit;
use sluice_redis::{NoticeEvent, RedisLimiter};

use crate::config::{Config, StoreLocation};
use crate::error::{ApiError, Cause, StartError, chain};

/// The bus topic of key store changes.
const TOPIC: &str = "keys";

/// How often a gateway that has seen no tenant reads the store again to
/// learn whether it has one now: a replica that started open closes
/// within this of a tenant created anywhere, bus or no bus.
pub const OPEN_RECHECK: Duration = Duration::from_secs(2);

/// The open key store, its cache, and what it set in the limiter.
#[derive(Debug, Clone)]
pub struct KeyRegistry {
    cache: KeyCache,
    /// Whether the store has tenants: then the gateway asks every caller
    /// for a key, as with `[[tenants]]`.
    has_tenants: Arc<AtomicBool>,
    redis: Option<RedisLimiter>,
    /// The limit last set on each caller resource, so that it is set
    /// again only when it changes (setting a limit forgives its debt).
    applied: Arc<Mutex<HashMap<String, Limit>>>,
    /// Keys and tenants changed here or on another replica, whose limits
    /// are to leave the limiter.
    retired: Arc<limits::Retired>,
}

/// A change as it travels on the bus.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Wire {
    Key(String),
    Tenant(String),
    Tier(String),
}

impl KeyRegistry {
    /// Opens the store `config.keys` names (creating the data directory
    /// for SQLite) and, with `redis`, listens for other replicas' changes.
    ///
    /// # Errors
    /// [`StartError::Keys`] naming the file or URL (password hidden).
    pub async fn open(
        config: &Config,
        redis: Option<RedisLimiter>,
    ) -> Result<KeyRegistry, StartError> {
        let k = &config.keys;
        let location = k.location(&config.data_dir, &config.jobs);
        let fail = |source: Cause| StartError::Keys {
            store: location.display(),
            source,
        };
        location.create_dir().map_err(|e| fail(e.into()))?;
        let store = match &location {
            StoreLocation::Sqlite(path) => KeyStore::open(path).await,
            StoreLocation::Postgres(url) => KeyStore::connect(url).await,
        }
        .map_err(|e| fail(e.into()))?;
        let has_tenants = !store
            .tenants()
            .await
            .map_err(|e| fail(e.into()))?
            .is_empty();
        let cache = KeyCache::with_ttls(
            store,
            Duration::from_secs(k.cache_ttl_seconds),
            Duration::from_secs(k.tier_cache_ttl_seconds),
        );
        let registry = KeyRegistry {
            cache,
            has_tenants: Arc::new(AtomicBool::new(has_tenants)),
            redis,
            applied: Arc::default(),
            retired: Arc::default(),
        };
        if !has_tenants {
            tokio::spawn(recheck_open(
                registry.store().clone(),
                Arc::downgrade(&registry.has_tenants),
            ));
        }
        if let Some(r) = &registry.redis {
            // Weak: the listener lives as long as the limiter, the cache
            // only as long as the gateway.
            let cache = registry.cache.clone();
            let retired = Arc::downgrade(&registry.retired);
            let has_tenants = Arc::downgrade(&registry.has_tenants);
            r.on_notice(move |e| {
                if has_tenants.upgrade().is_none() {
                    return;
                }
                match e {
                    NoticeEvent::Notice(n) if n.topic == TOPIC => {
                        match serde_json::from_str::<Wire>(&n.body) {
                            Ok(w) => {
                                if let (Wire::Tenant(_), Some(h)) = (&w, has_tenants.upgrade()) {
                                    h.store(true, Ordering::SeqCst);
                                }
                                let change = from_wire(w);
                                if let Some(r) = retired.upgrade() {
                                    r.push(&change);
                                }
                                cache.invalidate(&change);
                            }
                            Err(e) => tracing::warn!(error = %e, "ignoring a malformed key notice"),
                        }
                    }
                    NoticeEvent::Notice(_) => {}
                    NoticeEvent::Resubscribed => cache.invalidate_all(),
                }
            });
        }
        Ok(registry)
    }

    /// The store.
    pub fn store(&self) -> &KeyStore {
        self.cache.store()
    }

    /// The cache key checks read.
    pub fn cache(&self) -> &KeyCache {
        &self.cache
    }

    /// Whether the store has tenants (seen here or announced on the bus).
    pub fn has_tenants(&self) -> bool {
        self.has_tenants.load(Ordering::SeqCst)
    }

    /// Drops what `change` made stale here and tells the other replicas.
    /// A replica the notice cannot reach (Redis away) drops it within the
    /// cache's TTL, or at once when its bus comes back.
    pub async fn changed(&self, change: Change) {
        if matches!(change, Change::Tenant(_)) {
            self.has_tenants.store(true, Ordering::SeqCst);
        } else if !self.has_tenants() {
            // Any change: the store itself says whether there are tenants
            // now (a key names one that may have been made elsewhere).
            self.recheck().await;
        }
        self.cache.invalidate(&change);
        self.retired.push(&change);
        if let Some(r) = &self.redis {
            let body = serde_json::to_string(&to_wire(change)).unwrap_or_default();
            if let Err(e) = r.publish_notice(TOPIC, &body).await {
                tracing::warn!(error = %e, "could not announce a key change to the other replicas");
            }
        }
    }

    /// The caller `key` names.
    ///
    /// # Errors
    /// 401 for an unknown, revoked or expired key; 403 for a blocked key
    /// or tenant; 503 when the store cannot be read.
    pub async fn authenticate(&self, key: &str) -> Result<Arc<Caller>, ApiError> {
        match self.cache.authenticate(key).await {
            Ok(c) => Ok(c),
            Err(AuthError::Refused(r)) => Err(match r {
                Refusal::KeyBlocked | Refusal::TenantBlocked => ApiError::Forbidden(r.to_string()),
                Refusal::Malformed | Refusal::Unknown => {
                    ApiError::Unauthorized("unknown API key".into())
                }
                Refusal::Revoked | Refusal::Expired => ApiError::Unauthorized(r.to_string()),
            }),
            Err(AuthError::Store(e)) => {
                tracing::warn!(error = %chain(&e), "key store");
                Err(ApiError::Unavailable {
                    message: "the key store is unavailable".into(),
                    retry_after: Some(Duration::from_secs(1)),
                })
            }
        }
    }

    /// Reads the store: whether it has tenants now. Once it has, the
    /// gateway stays closed (a tenant deleted later does not open it).
    pub async fn recheck(&self) -> bool {
        if !self.has_tenants() && store_has_tenants(self.store()).await {
            self.has_tenants.store(true, Ordering::SeqCst);
            tracing::warn!("tenants found in the key store: every caller now needs a key");
        }
        self.has_tenants()
    }

    /// Closes the store's connections.
    pub async fn close(&self) {
        self.store().close().await;
    }
}

/// What a request in `ctx` takes for its caller's own limits, kept in
/// `keystore` and counted by `limits` (nothing
/// for a static key or an open gateway); `tokens` is its estimate, for a
/// model call.
///
/// # Errors
/// When the limiter refuses a limit.
pub(crate) fn caller_needs(
    keystore: Option<&KeyRegistry>,
    limits: &sluice_limit::SharedLimiter,
    ctx: &crate::request::Context,
    tokens: Option<u64>,
) -> Result<limits::CallerNeeds, ApiError> {
    match (&ctx.caller, keystore) {
        (Some(c), Some(r)) => r.needs(limits, c, tokens),
        _ => Ok(limits::CallerNeeds::default()),
    }
}

/// Whether `store` has a tenant; a store that cannot be read says no
/// (and is asked again at the next check).
async fn store_has_tenants(store: &KeyStore) -> bool {
    match store.tenants().await {
        Ok(t) => !t.is_empty(),
        Err(e) => {
            tracing::debug!(error = %chain(&e), "key store: cannot read the tenants");
            false
        }
    }
}

/// Reads `store` every [`OPEN_RECHECK`] until it has a tenant (then sets
/// `has_tenants`) or the registry is dropped: open mode is decided at
/// start-up and re-checked from the store itself, not only from notices
/// on the bus, which a replica without Redis (or one that missed the
/// notice) never hears.
async fn recheck_open(store: KeyStore, has_tenants: std::sync::Weak<AtomicBool>) {
    let mut tick = tokio::time::interval(OPEN_RECHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(flag) = has_tenants.upgrade() else {
            return;
        };
        if flag.load(Ordering::SeqCst) {
            return;
        }
        if store_has_tenants(&store).await {
            flag.store(true, Ordering::SeqCst);
            tracing::warn!("tenants found in the key store: every caller now needs a key");
            return;
        }
    }
}

fn to_wire(c: Change) -> Wire {
    match c {
        Change::Key(k) => Wire::Key(k),
        Change::Tenant(t) => Wire::Tenant(t),
        Change::Tier(t) => Wire::Tier(t),
    }
}

fn from_wire(w: Wire) -> Change {
    match w {
        Wire::Key(k) => Change::Key(k),
        Wire::Tenant(t) => Change::Tenant(t),
        Wire::Tier(t) => Change::Tier(t),
    }
}
