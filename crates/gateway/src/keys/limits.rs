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
//! they change (a tier or key update). Callers of the limiter API cannot
//! name these resources, nor see them in `GET /v1/limits`.

use std::sync::PoisonError;

use sluice_keys::{Caller, Limits};
use sluice_limit::{Limit, SharedLimiter};

use super::KeyRegistry;
use crate::error::ApiError;
use crate::state::rate_limit;

/// Every caller resource starts with it.
pub(crate) const CALLER_PREFIX: &str = "caller:";

/// How many set limits are remembered; past it the memory starts over
/// (the limits are then set once more, which forgives what they owed).
const MAX_APPLIED: usize = 100_000;

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
    use super::*;

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
