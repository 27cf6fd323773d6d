//! Checks of `[jobs]`: a store the gateway can open, positive durations,
//! and queues that can run.

use std::time::Duration;

use super::{Checks, key};
use crate::config::Config;
use crate::config::jobs::store_problem;
use crate::config::load::ConfigError;

/// The most attempts a queue or a job may allow.
pub(crate) const MAX_ATTEMPTS: u32 = 100;

pub(super) fn jobs(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let j = &config.jobs;
    if let Some(problem) = store_problem(&j.store) {
        return Err(c.fail(key(&["jobs", "store"]), problem));
    }
    for (name, value) in [
        ("completed_retention_seconds", j.completed_retention_seconds),
        ("dead_retention_seconds", j.dead_retention_seconds),
        ("cancelled_retention_seconds", j.cancelled_retention_seconds),
        ("events_retention_seconds", j.events_retention_seconds),
        ("idempotency_ttl_seconds", j.idempotency_ttl_seconds),
        ("lease_ms", j.lease_ms),
        ("heartbeat_ms", j.heartbeat_ms),
        ("cleanup_interval_seconds", j.cleanup_interval_seconds),
    ] {
        c.at_least(key(&["jobs", name]), value, 1)?;
    }
    if j.heartbeat_ms >= j.lease_ms {
        return Err(c.fail_either(
            [key(&["jobs", "heartbeat_ms"]), key(&["jobs", "lease_ms"])],
            format!(
                "heartbeat_ms ({}) must be less than lease_ms ({}): a lease must be renewed before it runs out",
                j.heartbeat_ms, j.lease_ms
            ),
        ));
    }
    let cb = &j.callbacks;
    let at = |field: &str| key(&["jobs", "callbacks", field]);
    if !cb.allow.is_empty() && cb.secret_env.as_deref().is_none_or(str::is_empty) {
        return Err(c.fail(
            at("secret_env"),
            "callbacks are signed: name the environment variable that holds the secret",
        ));
    }
    for prefix in &cb.allow {
        if let Err(why) = sluice_jobs_http::callback::CallbackConfig::new(
            std::slice::from_ref(prefix),
            vec![0],
            Duration::ZERO,
        ) {
            return Err(c.fail(at("allow"), why));
        }
    }
    c.at_least(at("timeout_ms"), cb.timeout_ms, 1)?;
    c.at_least(at("max_attempts"), u64::from(cb.max_attempts), 1)?;
    if cb.max_attempts > MAX_ATTEMPTS {
        return Err(c.fail(
            at("max_attempts"),
            format!("must be at most {MAX_ATTEMPTS}, not {}", cb.max_attempts),
        ));
    }
    for (name, q) in &j.queues {
        let at = |field: &str| key(&["jobs", "queues", name, field]);
        if name.is_empty() || name.len() > sluice_jobs::MAX_NAME_LEN {
            return Err(c.fail(
                key(&["jobs", "queues", name]),
                "a queue name must be 1 to 200 bytes",
            ));
        }
        c.at_least(at("concurrency"), u64::from(q.concurrency), 1)?;
        c.rate(at("rate"), q.rate)?;
        if let Some(rate) = q.group_rate {
            c.rate(at("group_rate"), rate)?;
        }
        c.at_least(at("max_attempts"), u64::from(q.max_attempts), 1)?;
        if q.max_attempts > MAX_ATTEMPTS {
            return Err(c.fail(
                at("max_attempts"),
                format!("must be at most {MAX_ATTEMPTS}, not {}", q.max_attempts),
            ));
        }
    }
    Ok(())
}
