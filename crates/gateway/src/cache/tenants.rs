//! What the cache did for each tenant, for `GET /v1/cache/stats` (a
//! tenant sees only its own).

use std::collections::HashMap;
use std::sync::Mutex;

use foldhash::fast::RandomState;

use serde::Serialize;
use sluice_usage::cache::Hit;

/// Tenants counted apart; past this many, further tenants are counted
/// under [`OTHER_TENANTS`] so that clients naming workspaces cannot grow
/// the map.
pub const MAX_TENANTS_COUNTED: usize = 10_000;

/// The name under which tenants past [`MAX_TENANTS_COUNTED`] count.
pub const OTHER_TENANTS: &str = "(other)";

/// One tenant's cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TenantStats {
    /// Requests answered from the cache.
    pub hits: u64,
    /// Requests looked up and not found.
    pub misses: u64,
    /// Requests not looked up.
    pub bypasses: u64,
    /// Input tokens not sent again.
    pub saved_prompt_tokens: u64,
    /// Output tokens not generated again.
    pub saved_completion_tokens: u64,
}

/// The counters of every tenant, bounded.
#[derive(Debug, Default)]
pub struct TenantCounters {
    tenants: Mutex<HashMap<Box<str>, TenantStats, RandomState>>,
}

impl TenantCounters {
    fn with(&self, tenant: &str, f: impl FnOnce(&mut TenantStats)) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        f(crate::dashboard::pulse::slot(
            &mut tenants,
            tenant,
            MAX_TENANTS_COUNTED,
            OTHER_TENANTS,
        ));
    }

    pub(crate) fn hit(&self, tenant: &str, hit: &Hit) {
        let usage = hit.entry.usage();
        self.with(tenant, |s| {
            s.hits += 1;
            if let Some(u) = usage {
                s.saved_prompt_tokens = s.saved_prompt_tokens.saturating_add(u.prompt_tokens);
                s.saved_completion_tokens = s
                    .saved_completion_tokens
                    .saturating_add(u.completion_tokens);
            }
        });
    }

    pub(crate) fn miss(&self, tenant: &str) {
        self.with(tenant, |s| s.misses += 1);
    }

    pub(crate) fn bypass(&self, tenant: &str) {
        self.with(tenant, |s| s.bypasses += 1);
    }

    /// `tenant`'s counters (zero when it has none).
    pub fn of(&self, tenant: &str) -> TenantStats {
        let tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        tenants.get(tenant).copied().unwrap_or_default()
    }
}
