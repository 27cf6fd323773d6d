//! Checks of `[keys]` and `[audit]`: stores the gateway can open, cache
//! times of at least a second, a queue of at least one entry.

use super::{Checks, key};
use crate::config::Config;
use crate::config::WITH_JOBS;
use crate::config::jobs::store_problem;
use crate::config::load::ConfigError;
use crate::config::redact_url;

pub(super) fn keys(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let k = &config.keys;
    store_beside_jobs(c, "keys", &k.store)?;
    c.at_least(key(&["keys", "cache_ttl_seconds"]), k.cache_ttl_seconds, 1)?;
    c.at_least(
        key(&["keys", "tier_cache_ttl_seconds"]),
        k.tier_cache_ttl_seconds,
        1,
    )
}

/// `[audit]`: a store the gateway can open, a queue of at least one.
pub(super) fn audit(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let a = &config.audit;
    store_beside_jobs(c, "audit", &a.store)?;
    c.at_least(key(&["audit", "queue"]), a.queue as u64, 1)
}

/// `[section] store`: `"jobs"`, `"sqlite"` or a PostgreSQL URL.
pub(super) fn store_beside_jobs(
    c: &Checks<'_>,
    section: &str,
    store: &str,
) -> Result<(), ConfigError> {
    if store == WITH_JOBS {
        return Ok(());
    }
    let Some(problem) = store_problem(store) else {
        return Ok(());
    };
    // The URL's own problems as they are; a store of no known kind lists
    // the three kinds.
    let problem = if problem.starts_with("must be") {
        format!(
            "must be \"jobs\", \"sqlite\" or a postgres:// URL, not {:?}",
            redact_url(store)
        )
    } else {
        problem
    };
    Err(c.fail(key(&[section, "store"]), problem))
}
