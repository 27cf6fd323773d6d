//! [`KeyCache`]: key checks off the database. Keys and tenants are kept
//! for 60 s and tiers for an hour (the seed's quota and tier TTLs), and
//! dropped at once when the operator changes them here
//! ([`invalidate`](KeyCache::invalidate)); other gateways hear of it
//! through whatever bus their owner runs and call the same.
//!
//! A key's [`Caller`] — its limits and budgets resolved through its
//! tenant and tiers — is kept too, for as long as a key: a check of a
//! key seen lately is one cache read by the key's id, the SHA-256 of the
//! presented key compared with the stored one, and the key's grace
//! period; nothing is resolved, copied or allocated again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::budget::{Budget, budgets_over};
use crate::db::StoredKey;
use crate::error::{Error, Refusal};
use crate::limits::Limits;
use crate::model::{TenantRecord, TenantState, Tier};
use crate::secret;
use crate::store::KeyStore;

/// The seed's quota TTL: keys and tenants.
pub const KEY_TTL: Duration = Duration::from_secs(60);
/// The seed's tier TTL.
pub const TIER_TTL: Duration = Duration::from_secs(3_600);
/// Entries per cache; the least used go first.
const CAPACITY: u64 = 100_000;

fn bounded<V: Clone + Send + Sync + 'static>(ttl: Duration) -> Cache<String, V> {
    Cache::builder()
        .max_capacity(CAPACITY)
        .time_to_live(ttl)
        .build()
}

/// Who a key belongs to and what it may do, resolved through the tiers.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// The tenant.
    pub tenant: Arc<str>,
    /// The key's id.
    pub key_id: Arc<str>,
    /// The key's own limits over its tier's: its own bucket.
    pub key_limits: Limits,
    /// The tenant's limits over its tier's: shared by its keys.
    pub tenant_limits: Limits,
    /// The key's own budgets over its tier's: spent by it alone.
    pub key_budgets: Arc<[Budget]>,
    /// The tenant's budgets over its tier's: spent by all its keys.
    pub tenant_budgets: Arc<[Budget]>,
    /// The key's tags, then the tenant's.
    pub tags: Vec<String>,
}

impl Caller {
    /// Whether both the key and its tenant allow `model`.
    pub fn allows_model(&self, model: &str) -> bool {
        self.key_limits.allows_model(model) && self.tenant_limits.allows_model(model)
    }

    /// Whether both the key and its tenant allow the API `api`.
    pub fn allows_api(&self, api: &str) -> bool {
        self.key_limits.allows_api(api) && self.tenant_limits.allows_api(api)
    }

    /// Whether both the key and its tenant allow the MCP tool `tool` of
    /// `server`.
    pub fn allows_tool(&self, server: &str, tool: &str) -> bool {
        self.key_limits.allows_tool(server, tool) && self.tenant_limits.allows_tool(server, tool)
    }

    /// Whether both the key and its tenant show MCP server `server` (its
    /// resources and prompts).
    pub fn allows_server(&self, server: &str) -> bool {
        self.key_limits.allows_server(server) && self.tenant_limits.allows_server(server)
    }

    /// The default priority: the key's, else the tenant's.
    pub fn priority(&self) -> Option<&str> {
        (self.key_limits.priority.as_deref()).or(self.tenant_limits.priority.as_deref())
    }

    /// The fairness weight: the key's, else the tenant's.
    pub fn weight(&self) -> Option<u32> {
        self.key_limits.weight.or(self.tenant_limits.weight)
    }
}

/// Why [`KeyCache::authenticate`] did not name a caller.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The key is refused.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The store could not be read (and nothing was cached).
    #[error(transparent)]
    Store(#[from] Error),
}

/// What [`KeyCache::invalidate`] drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A key (by id) was revoked, blocked, rotated or updated.
    Key(String),
    /// A tenant was blocked, unblocked or updated.
    Tenant(String),
    /// A tier was created or updated.
    Tier(String),
}

/// A key with its caller resolved at the time.
#[derive(Debug)]
struct Resolved {
    key: Arc<StoredKey>,
    caller: Arc<Caller>,
}

/// A cache of keys, tenants and tiers in front of a [`KeyStore`].
#[derive(Debug, Clone)]
pub struct KeyCache {
    store: KeyStore,
    /// Resolved callers by key id, dropped with their key, or all of
    /// them with any tenant or tier (which any caller may depend on).
    callers: Cache<String, Arc<Resolved>>,
    keys: Cache<String, Option<Arc<StoredKey>>>,
    tenants: Cache<String, Option<Arc<TenantRecord>>>,
    tiers: Cache<String, Option<Arc<Tier>>>,
    /// Bumped by every invalidation: a read of the store that began
    /// before one is not cached, so that a revocation racing a cache miss
    /// cannot leave the revoked key cached for a whole TTL.
    epoch: Arc<AtomicU64>,
}

impl KeyCache {
    /// A cache with the seed's TTLs (keys and tenants 60 s, tiers 1 h).
    pub fn new(store: KeyStore) -> KeyCache {
        KeyCache::with_ttls(store, KEY_TTL, TIER_TTL)
    }

    /// A cache keeping keys and tenants for `keys`, tiers for `tiers`.
    pub fn with_ttls(store: KeyStore, keys: Duration, tiers: Duration) -> KeyCache {
        KeyCache {
            store,
            callers: bounded(keys),
            keys: bounded(keys),
            tenants: bounded(keys),
            tiers: bounded(tiers),
            epoch: Arc::default(),
        }
    }

    /// The store behind it.
    pub fn store(&self) -> &KeyStore {
        &self.store
    }

    /// Drops what `change` makes stale, so the next check reads the store.
    pub fn invalidate(&self, change: &Change) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        match change {
            Change::Key(id) => {
                self.keys.invalidate(id);
                self.callers.invalidate(id);
            }
            Change::Tenant(name) => {
                self.tenants.invalidate(name);
                self.callers.invalidate_all();
            }
            Change::Tier(name) => {
                self.tiers.invalidate(name);
                self.callers.invalidate_all();
            }
        }
    }

    /// Drops everything (after a lost bus connection, say).
    pub fn invalidate_all(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.callers.invalidate_all();
        self.keys.invalidate_all();
        self.tenants.invalidate_all();
        self.tiers.invalidate_all();
    }

    /// The caller that `key` names, if its key and tenant are usable now.
    ///
    /// # Errors
    /// [`AuthError::Refused`] saying why not; [`AuthError::Store`] when
    /// the store must be read and cannot be.
    pub async fn authenticate(&self, key: &str) -> Result<Arc<Caller>, AuthError> {
        let id = secret::key_id(key).ok_or(Refusal::Malformed)?;
        if let Some(r) = self.callers.get(id) {
            if !secret::verify(key, &r.key.hash) {
                return Err(Refusal::Unknown.into());
            }
            // A rotated key's grace ends while it is cached.
            r.key.record.usable_at(self.store.now_ms())?;
            return Ok(r.caller.clone());
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let (key, caller) = self.resolve(id, key).await?;
        let caller = Arc::new(caller);
        self.remember(epoch, || {
            let resolved = Resolved {
                key,
                caller: caller.clone(),
            };
            self.callers.insert(id.to_owned(), Arc::new(resolved));
        });
        Ok(caller)
    }

    /// The key of id `id`, checked against the presented `key`, and its
    /// caller, read through the key, tenant and tier caches.
    async fn resolve(&self, id: &str, key: &str) -> Result<(Arc<StoredKey>, Caller), AuthError> {
        let stored = match self.keys.get(id) {
            Some(k) => k,
            None => {
                let epoch = self.epoch.load(Ordering::SeqCst);
                let k = self.store.stored_key(id).await?.map(Arc::new);
                self.remember(epoch, || self.keys.insert(id.to_owned(), k.clone()));
                k
            }
        };
        let stored = stored.ok_or(Refusal::Unknown)?;
        if !secret::verify(key, &stored.hash) {
            return Err(Refusal::Unknown.into());
        }
        let k = &stored.record;
        k.usable_at(self.store.now_ms())?;
        let tenant = self.tenant(&k.tenant).await?.ok_or(Refusal::Unknown)?;
        if tenant.state == TenantState::Blocked {
            return Err(Refusal::TenantBlocked.into());
        }
        let key_tier = self.tier(k.tier.as_deref()).await?;
        let tenant_tier = self.tier(tenant.tier.as_deref()).await?;
        let (key_limits, key_budgets) = resolve(&k.limits, &k.budgets, key_tier.as_deref());
        let (tenant_limits, tenant_budgets) =
            resolve(&tenant.limits, &tenant.budgets, tenant_tier.as_deref());
        let mut tags = k.tags.clone();
        tags.extend(tenant.tags.iter().cloned());
        let caller = Caller {
            tenant: Arc::from(tenant.name.as_str()),
            key_id: Arc::from(k.id.as_str()),
            key_limits,
            tenant_limits,
            key_budgets,
            tenant_budgets,
            tags,
        };
        Ok((stored, caller))
    }

    /// Caches what was read if nothing was invalidated since `epoch`.
    /// (An invalidation between this check and the insert can still slip
    /// through; the window is a few instructions, not a database read.)
    fn remember(&self, epoch: u64, insert: impl FnOnce()) {
        if self.epoch.load(Ordering::SeqCst) == epoch {
            insert();
        }
    }

    async fn tenant(&self, name: &str) -> Result<Option<Arc<TenantRecord>>, Error> {
        if let Some(t) = self.tenants.get(name) {
            return Ok(t);
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let t = self.store.tenant(name).await?.map(Arc::new);
        self.remember(epoch, || self.tenants.insert(name.to_owned(), t.clone()));
        Ok(t)
    }

    /// A tier; none (or one deleted under us) limits nothing.
    async fn tier(&self, name: Option<&str>) -> Result<Option<Arc<Tier>>, Error> {
        let Some(name) = name else {
            return Ok(None);
        };
        let tier = match self.tiers.get(name) {
            Some(t) => t,
            None => {
                let epoch = self.epoch.load(Ordering::SeqCst);
                let t = self.store.tier(name).await?.map(Arc::new);
                self.remember(epoch, || self.tiers.insert(name.to_owned(), t.clone()));
                t
            }
        };
        Ok(tier)
    }
}

/// Own limits and budgets over those of `tier`.
fn resolve(limits: &Limits, budgets: &[Budget], tier: Option<&Tier>) -> (Limits, Arc<[Budget]>) {
    match tier {
        Some(t) => (
            limits.over(&t.limits),
            budgets_over(budgets, &t.budgets).into(),
        ),
        None => (limits.clone(), budgets.into()),
    }
}
