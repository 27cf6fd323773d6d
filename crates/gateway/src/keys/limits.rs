//! Per-key and per-tenant limits as limiter resources, taken with the
//! upstream's in one acquisition (so a request waits for, or is refused
//! by, whichever is short, and the refusal names it):
//!
//! | resource | limit |
//! |---|---|
//! | `caller:key:{id}:rps` / `caller:tenant:{name}:rps` | `requests_per_second` |
//! | `…:rpm` | `requests_per_minute` |
//! | `…:tpm` | `tokens_per_minute` (the request's estimate, settled to its usage) |
//! | `…:concurrent` | `max_concurrent` (held until the answer is delivered) |
//!
//! The limits are set in the limiter when first used and again only when
//! they change (a tier or key update). A key's or tenant's are dropped
//! from the limiter when it changes — revoked, blocked, rotated, updated,
//! here or on another replica (the bus's notice) — so that keys that will
//! never call again do not stay registered (in Redis mode a replica may
//! set at most 65,536); one still in use is set again at its next call.
//! Callers of the limiter API cannot name these resources, nor see them
//! in `GET /v1/limits`.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

use sluice_keys::Change;

use sluice_keys::{Caller, Limits};
use sluice_limit::{Limit, SharedLimiter};

use super::KeyRegistry;
use crate::error::ApiError;
use crate::limits::resources::CALLER_PREFIX;
use crate::limits::rules::rate_limit;

/// How many set limits are remembered; past it the memory starts over
/// (the limits are then set once more, which forgives what they owed).
const MAX_APPLIED: usize = 100_000;

/// The limit suffixes of a caller scope.
const SUFFIXES: [&str; 4] = ["rps", "rpm", "tpm", "concurrent"];

/// Most scopes waiting to be dropped; past it the oldest are forgotten
/// (and stay set until their next change).
const MAX_RETIRED: usize = 10_000;

/// Caller scopes whose limits are to be dropped from the limiter at the
/// next request (which holds the limiter): bus notices arrive where it is
/// not at hand.
#[derive(Debug, Default)]
pub(crate) struct Retired {
    any: std::sync::atomic::AtomicBool,
    scopes: Mutex<Vec<String>>,
}

impl Retired {
    /// Queues the scope `change` names (`key:{id}`, `tenant:{name}`).
    pub(crate) fn push(&self, change: &Change) {
        let scope = match change {
            Change::Key(id) => format!("key:{id}"),
            Change::Tenant(name) => format!("tenant:{name}"),
            // Its members' limits are compared, and set again if changed,
            // at their next call.
            Change::Tier(_) => return,
        };
        let mut scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        if scopes.len() >= MAX_RETIRED {
            scopes.remove(0);
        }
        scopes.push(scope);
        self.any.store(true, Ordering::Release);
    }
}

/// What a caller's request takes besides the upstream's resources.
#[derive(Debug, Default)]
pub(crate) struct CallerNeeds {
    /// `(resource, cost)`.
    pub needs: Vec<(String, u64)>,
    /// The token resources among them, to settle to the usage.
    pub tokens: Vec<String>,
}

impl KeyRegistry {
    /// The caller resources of a request by `caller` that is estimated at
    /// `tokens` (`None`: not a model call), their limits set in `limits`.
    ///
    /// # Errors
    /// When the limiter refuses a limit (too many set in Redis).
    pub(crate) fn needs(
        &self,
        limits: &SharedLimiter,
        caller: &Caller,
        tokens: Option<u64>,
    ) -> Result<CallerNeeds, ApiError> {
        if self.retired.any.load(Ordering::Acquire) {
            self.drop_retired(limits);
        }
        let mut out = CallerNeeds::default();
        let scopes = [
            (format!("key:{}", caller.key_id), &caller.key_limits),
            (format!("tenant:{}", caller.tenant), &caller.tenant_limits),
        ];
        for (scope, l) in scopes {
            for (suffix, limit, cost) in wanted(l, tokens) {
                let resource = format!("{CALLER_PREFIX}{scope}:{suffix}");
                self.ensure(limits, &resource, limit)?;
                if suffix == "tpm" {
                    out.tokens.push(resource.clone());
                }
                out.needs.push((resource, cost));
            }
        }
        Ok(out)
    }

    /// Drops the limits of the retired scopes from `limits`; one still
    /// busy (a call of a just-revoked key in flight) is tried again at the
    /// next request.
    pub(crate) fn drop_retired(&self, limits: &SharedLimiter) {
        let scopes = {
            let mut s = self
                .retired
                .scopes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.retired.any.store(false, Ordering::Release);
            std::mem::take(&mut *s)
        };
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        let mut busy = Vec::new();
        for scope in scopes {
            let mut kept = false;
            for suffix in SUFFIXES {
                let resource = format!("{CALLER_PREFIX}{scope}:{suffix}");
                applied.remove(&resource);
                kept |= limits.contains(&resource) && !limits.remove_idle(&resource);
            }
            if kept {
                busy.push(scope);
            }
        }
        drop(applied);
        if !busy.is_empty() {
            let mut s = self
                .retired
                .scopes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            s.extend(busy);
            self.retired.any.store(true, Ordering::Release);
        }
    }

    /// Sets `limit` on `resource` unless it is set already.
    fn ensure(&self, limits: &SharedLimiter, resource: &str, limit: Limit) -> Result<(), ApiError> {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        if applied.get(resource) == Some(&limit) && limits.contains(resource) {
            return Ok(());
        }
        limits
            .set_limit(resource, limit)
            .map_err(|e| ApiError::from_limit(e, None))?;
        if applied.len() >= MAX_APPLIED {
            applied.clear();
        }
        applied.insert(resource.to_owned(), limit);
        Ok(())
    }
}

/// `(suffix, limit, cost)` of each limit `l` sets.
fn wanted(l: &Limits, tokens: Option<u64>) -> Vec<(&'static str, Limit, u64)> {
    let mut out = Vec::new();
    if let Some(r) = l.requests_per_second {
        // A second's worth at once, at least one.
        let burst = r.ceil().max(1.0) as u64;
        out.push(("rps", rate_limit(r, burst), 1));
    }
    if let Some(n) = l.requests_per_minute {
        out.push(("rpm", Limit::per_minute(n), 1));
    }
    if let (Some(n), Some(t)) = (l.tokens_per_minute, tokens) {
        out.push(("tpm", Limit::per_minute(n), t));
    }
    if let Some(n) = l.max_concurrent {
        out.push(("concurrent", Limit::in_flight(n), 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;

    fn caller(key: &str, tenant: &str, rpm: u64) -> Caller {
        let l = Limits {
            requests_per_minute: Some(rpm),
            ..Limits::default()
        };
        Caller {
            tenant: tenant.into(),
            key_id: key.into(),
            key_limits: l.clone(),
            tenant_limits: l,
            key_budgets: Arc::from([]),
            tenant_budgets: Arc::from([]),
            tags: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_changed_keys_limits_leave_the_limiter() {
        let mut config = Config {
            data_dir: std::env::temp_dir().join(format!(
                "sluice-retired-{}-{:x}",
                std::process::id(),
                fastrand::u64(..)
            )),
            ..Config::default()
        };
        config.keys.store = "sqlite".into();
        let r = KeyRegistry::open(&config, None).await.unwrap();
        let limiter: SharedLimiter = sluice_limit::Limiter::builder().build().unwrap().into();
        r.needs(&limiter, &caller("k1", "acme", 60), None).unwrap();
        r.needs(&limiter, &caller("k2", "acme", 60), None).unwrap();
        for res in [
            "caller:key:k1:rpm",
            "caller:key:k2:rpm",
            "caller:tenant:acme:rpm",
        ] {
            assert!(limiter.contains(res), "{res}");
        }
        // Revoked (or blocked, rotated, changed): gone at the next call,
        // whoever makes it; the others stay.
        r.changed(Change::Key("k1".into())).await;
        r.needs(&limiter, &caller("k2", "acme", 60), None).unwrap();
        assert!(!limiter.contains("caller:key:k1:rpm"));
        assert!(limiter.contains("caller:key:k2:rpm"));
        // One in use stays until it is idle.
        let grant = limiter
            .acquire_many(&[("caller:key:k2:rpm", 1)], None)
            .await
            .unwrap();
        r.changed(Change::Key("k2".into())).await;
        r.needs(&limiter, &caller("k3", "acme", 60), None).unwrap();
        assert!(limiter.contains("caller:key:k2:rpm"), "busy: kept");
        drop(grant);
        r.needs(&limiter, &caller("k3", "acme", 60), None).unwrap();
        assert!(!limiter.contains("caller:key:k2:rpm"));
        r.close().await;
        let _ = std::fs::remove_dir_all(&config.data_dir);
    }

    #[test]
    fn each_limit_is_a_resource() {
        let l = Limits {
            requests_per_second: Some(2.5),
            requests_per_minute: Some(60),
            tokens_per_minute: Some(1_000),
            max_concurrent: Some(3),
            ..Limits::default()
        };
        let got: Vec<_> = wanted(&l, Some(40))
            .into_iter()
            .map(|(s, _, c)| (s, c))
            .collect();
        assert_eq!(
            got,
            [("rps", 1), ("rpm", 1), ("tpm", 40), ("concurrent", 1)]
        );
        // Not a model call: no token limit to take.
        assert_eq!(wanted(&l, None).len(), 3);
        assert!(wanted(&Limits::default(), Some(1)).is_empty());
    }
}
