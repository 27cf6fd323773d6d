//! Tenants, API keys and tiers managed at run time: a [`KeyStore`] on
//! SQLite (one machine) or PostgreSQL (several gateways, the job store's
//! database) that keeps only SHA-256 hashes of keys, and a [`KeyCache`]
//! that keeps key checks off the database.
//!
//! A key reads `sk-sluice-<id>_<secret>`: the id is public (it lists,
//! rotates and revokes the key), the secret is shown once. A key is
//! active, blocked (until unblocked), revoked (for good) or rotated (it
//! works until the end of its grace period, beside the key that replaced
//! it). Tiers are named [`Limits`] that tenants and keys refer to, so that
//! changing a tier changes all its members.
//!
//! ```
//! use std::time::Duration;
//! use sluice_keys::{KeyCache, KeyStore, Limits, NewKey, NewTenant, Refusal, AuthError};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = KeyStore::in_memory().await?;
//! store.create_tier("free", &Limits { requests_per_minute: Some(60), ..Limits::default() }).await?;
//! store.create_tenant(&NewTenant { name: "acme".into(), tier: Some("free".into()), ..NewTenant::default() }).await?;
//! let issued = store.issue_key(&NewKey { tenant: "acme".into(), ..NewKey::default() }).await?;
//!
//! let cache = KeyCache::new(store.clone());
//! let caller = cache.authenticate(&issued.key).await?;
//! assert_eq!((&*caller.tenant, caller.tenant_limits.requests_per_minute), ("acme", Some(60)));
//!
//! // Rotate with a minute's grace: both keys work for now.
//! let (new, _old) = store.rotate_key(&issued.record.id, Duration::from_secs(60)).await?;
//! cache.invalidate(&sluice_keys::Change::Key(issued.record.id.clone()));
//! assert!(cache.authenticate(&issued.key).await.is_ok());
//! assert!(cache.authenticate(&new.key).await.is_ok());
//!
//! // Revoked: refused as soon as the cache hears of it.
//! store.revoke_key(&new.record.id).await?;
//! cache.invalidate(&sluice_keys::Change::Key(new.record.id.clone()));
//! assert!(matches!(cache.authenticate(&new.key).await, Err(AuthError::Refused(Refusal::Revoked))));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod budget;
mod cache;
mod db;
mod error;
pub mod glob;
mod limits;
mod model;
mod ops;
mod secret;
mod sql;
mod store;

pub use budget::{
    Budget, MAX_BUDGETS, MAX_WINDOW_SECONDS, MIN_WINDOW_SECONDS, Money, Period, budgets_over,
    validate_budgets,
};
pub use cache::{AuthError, Caller, Change, KEY_TTL, KeyCache, TIER_TTL};
pub use error::{Error, Refusal};
pub use glob::matches as glob_matches;
pub use limits::{Limits, PRIORITIES};
pub use model::{
    IssuedKey, KeyRecord, KeyState, NewKey, NewTenant, TenantRecord, TenantState, Tier, Update,
    validate_name,
};
pub use ops::MAX_GRACE;
pub use secret::{PREFIX, key_id};
pub use sluice_store::{Clock, ManualClock, SystemClock, Timestamp};
pub use store::KeyStore;
