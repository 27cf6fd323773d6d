//! Checks of `[keys]`: a store the gateway can open, cache times of at
//! least a second.

use super::{Checks, key};
use crate::config::Config;
use crate::config::WITH_JOBS;
use crate::config::jobs::store_problem;
use crate::config::load::ConfigError;
use crate::config::redact_url;

pub(super) fn keys(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let k = &config.keys;
    store(c, "keys", &k.store)?;
    c.at_least(key(&["keys", "cache_ttl_seconds"]), k.cache_ttl_seconds, 1)?;
    c.at_least(
        key(&["keys", "tier_cache_ttl_seconds"]),
        k.tier_cache_ttl_seconds,
        1,
    )
}

/// `[{section}] store`: `"jobs"`, `"sqlite"` or a PostgreSQL URL.
pub(super) fn store(c: &Checks<'_>, section: &str, store: &str) -> Result<(), ConfigError> {
    if store != WITH_JOBS
        && let Some(problem) = store_problem(store)
    {
        // The URL's own problems as they are; a store of no known kind
        // lists the three kinds.
        let problem = if problem.starts_with("must be") {
            format!(
                "must be \"jobs\", \"sqlite\" or a postgres:// URL, not {:?}",
                redact_url(store)
            )
        } else {
            problem
        };
        return Err(c.fail(key(&[section, "store"]), problem));
    }
    Ok(())
}
