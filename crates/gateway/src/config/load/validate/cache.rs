//! Checks of `[cache]`: bounds that can hold an answer, TTLs within the
//! longest, a Redis to share through, and names that point somewhere.

use std::collections::HashMap;

use super::{Checks, key};
use crate::config::Config;
use crate::config::cache::{MAX_SESSION_ENTRIES, MAX_TTL_SECONDS};
use crate::config::load::ConfigError;

pub(super) fn cache(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let s = &config.cache;
    let at = |k: &str| key(&["cache", k]);
    c.at_least(at("max_bytes"), s.max_bytes, 1)?;
    c.at_least(at("max_entry_bytes"), s.max_entry_bytes, 1)?;
    if s.max_entry_bytes > u64::from(u32::MAX) {
        return Err(c.fail(
            at("max_entry_bytes"),
            format!("must be at most {}, not {}", u32::MAX, s.max_entry_bytes),
        ));
    }
    if s.max_entry_bytes > s.max_bytes {
        return Err(c.fail_either(
            [at("max_entry_bytes"), at("max_bytes")],
            format!(
                "max_entry_bytes ({}) must not exceed max_bytes ({})",
                s.max_entry_bytes, s.max_bytes
            ),
        ));
    }
    c.at_least(at("max_ttl_seconds"), s.max_ttl_seconds, 1)?;
    if s.max_ttl_seconds > MAX_TTL_SECONDS {
        return Err(c.fail(
            at("max_ttl_seconds"),
            format!(
                "must be at most {MAX_TTL_SECONDS} (30 days), not {}",
                s.max_ttl_seconds
            ),
        ));
    }
    ttl(c, at("ttl_seconds"), s.ttl_seconds, s.max_ttl_seconds)?;
    if let Some(idle) = s.idle_seconds {
        c.at_least(at("idle_seconds"), idle, 1)?;
    }
    if s.session_entries > MAX_SESSION_ENTRIES {
        return Err(c.fail(
            at("session_entries"),
            format!(
                "must be at most {MAX_SESSION_ENTRIES}, not {}",
                s.session_entries
            ),
        ));
    }
    if s.session_entries > 0 {
        c.at_least(at("max_session_bytes"), s.max_session_bytes, 1)?;
    }
    if s.redis && config.redis.is_none() {
        return Err(c.fail(
            at("redis"),
            "needs a [redis] section: the shared cache uses its url and prefix",
        ));
    }
    for (prefix, m) in &s.models {
        if prefix.is_empty() {
            return Err(c.fail(
                key(&["cache", "models", ""]),
                "a model prefix must not be empty",
            ));
        }
        if let Some(seconds) = m.ttl_seconds {
            let path = key(&["cache", "models", prefix, "ttl_seconds"]);
            ttl(c, path, seconds, s.max_ttl_seconds)?;
        }
    }
    for (name, a) in &s.apis {
        if config.api(name).is_none() {
            return Err(c.fail(
                key(&["cache", "apis", name]),
                format!("names no API: `{name}` is not in [[apis]]"),
            ));
        }
        if let Some(seconds) = a.ttl_seconds {
            let path = key(&["cache", "apis", name, "ttl_seconds"]);
            ttl(c, path, seconds, s.max_ttl_seconds)?;
        }
    }
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (name, tenants) in &s.namespaces {
        let path = key(&["cache", "namespaces", name]);
        if name.is_empty() {
            return Err(c.fail(path, "a namespace name must not be empty"));
        }
        if tenants.is_empty() {
            return Err(c.fail(path, "a namespace must name at least one tenant"));
        }
        for tenant in tenants {
            if let Some(first) = seen.insert(tenant, name) {
                return Err(c.fail(
                    path,
                    format!("tenant `{tenant}` is also in namespace `{first}`"),
                ));
            }
        }
    }
    Ok(())
}

fn ttl(c: &Checks<'_>, path: super::KeyPath, seconds: u64, max: u64) -> Result<(), ConfigError> {
    c.at_least(path.clone(), seconds, 1)?;
    if seconds > max {
        return Err(c.fail(
            path,
            format!("must be at most max_ttl_seconds ({max}), not {seconds}"),
        ));
    }
    Ok(())
}
