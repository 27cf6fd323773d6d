//! Checks of `[[pools]]` and `[aliases]`: every deployment names a known
//! provider and a usable limit, no deployment is in two places, every
//! name is bounded, and an alias leads to a model something serves.

use super::{Checks, key};
use crate::config::load::{ConfigError, KeyPath, Seg};
use crate::config::{Config, MAX_DEPLOYMENTS, MAX_POOLS};
use crate::names::MAX_NAME;

/// The most aliases a configuration may have.
const MAX_ALIASES: usize = 1_024;

/// The largest weight a deployment may have.
const MAX_WEIGHT: u32 = 1_000;

/// `pools[i].deployments[j].field` (or without the field).
fn deployment(i: usize, j: usize, field: &str) -> KeyPath {
    let mut path = vec![
        Seg::Key("pools".into()),
        Seg::Index(i),
        Seg::Key("deployments".into()),
        Seg::Index(j),
    ];
    if !field.is_empty() {
        path.push(Seg::Key(field.into()));
    }
    path
}

/// A model name a configuration gives (a pool's, an alias, a target):
/// what a caller may send, visible ASCII of at most [`MAX_NAME`] bytes.
fn name(c: &Checks<'_>, at: KeyPath, value: &str) -> Result<(), ConfigError> {
    if value.is_empty() {
        return Err(c.fail(at, "must not be empty"));
    }
    if value.len() > MAX_NAME {
        return Err(c.fail(at, format!("must be at most {MAX_NAME} bytes")));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(c.fail(at, "must be visible ASCII (no spaces)"));
    }
    Ok(())
}

pub(super) fn pools(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    if config.pools.len() > MAX_POOLS {
        return Err(c.fail(
            key(&["pools"]),
            format!("at most {MAX_POOLS} pools, not {}", config.pools.len()),
        ));
    }
    for (i, p) in config.pools.iter().enumerate() {
        let at = |field: &str| super::item("pools", i, field);
        name(c, at("model"), &p.model)?;
        if config.aliases.contains_key(&p.model) {
            return Err(c.fail(
                at("model"),
                format!("`{}` is also an alias in `[aliases]`", p.model),
            ));
        }
        c.at_least(at("failures_to_open"), u64::from(p.failures_to_open), 1)?;
        if p.failures_to_open > 1_000 {
            return Err(c.fail(at("failures_to_open"), "must be at most 1000"));
        }
        c.at_least(at("open_ms"), p.open_ms, 10)?;
        if p.open_ms > 600_000 {
            return Err(c.fail(at("open_ms"), "must be at most 600000 (10 minutes)"));
        }
        if p.deployments.is_empty() {
            return Err(c.fail(at("deployments"), "a pool needs at least one deployment"));
        }
        if p.deployments.len() > MAX_DEPLOYMENTS {
            return Err(c.fail(
                at("deployments"),
                format!(
                    "at most {MAX_DEPLOYMENTS} deployments, not {}",
                    p.deployments.len()
                ),
            ));
        }
        for (j, d) in p.deployments.iter().enumerate() {
            let Some(provider) = config.provider_named(&d.provider) else {
                let known: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
                return Err(c.fail(
                    deployment(i, j, "provider"),
                    format!(
                        "no provider is named `{}`: expected one of {}",
                        d.provider,
                        known.join(", ")
                    ),
                ));
            };
            if let Some(m) = &d.model {
                name(c, deployment(i, j, "model"), m)?;
            }
            let upstream = d.upstream_model(&p.model);
            if upstream.is_empty() {
                return Err(c.fail(
                    deployment(i, j, "model"),
                    "the pool's model has nothing after its prefix: name the upstream model",
                ));
            }
            let adapter = crate::providers::for_format(config.providers[provider].format);
            if let Err(b) = adapter.check_model(upstream) {
                return Err(c.fail(deployment(i, j, "model"), b.message));
            }
            c.rate(
                deployment(i, j, "requests_per_second"),
                d.requests_per_second,
            )?;
            c.at_least(deployment(i, j, "burst"), d.burst, 1)?;
            if let Some(tpm) = d.tokens_per_minute {
                c.at_least(deployment(i, j, "tokens_per_minute"), tpm, 1)?;
            }
            if let Some(n) = d.max_in_flight {
                c.at_least(deployment(i, j, "max_in_flight"), n, 1)?;
            }
            c.at_least(deployment(i, j, "weight"), u64::from(d.weight), 1)?;
            if d.weight > MAX_WEIGHT {
                return Err(c.fail(
                    deployment(i, j, "weight"),
                    format!("must be at most {MAX_WEIGHT}"),
                ));
            }
        }
    }
    c.unique(
        "pool",
        (config.pools.iter().enumerate())
            .map(|(i, p)| (super::item("pools", i, "model"), &*p.model)),
    )?;
    // One upstream (a provider's model) is one quota: in two places it
    // would be paced twice, at twice its limit.
    let resources: Vec<(KeyPath, String)> = (config.pools.iter().enumerate())
        .flat_map(|(i, p)| {
            p.deployments
                .iter()
                .enumerate()
                .map(move |(j, d)| (deployment(i, j, ""), d.resource(&p.model)))
        })
        .collect();
    c.unique(
        "deployment",
        resources.iter().map(|(path, r)| (path.clone(), r.as_str())),
    )
}

pub(super) fn aliases(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    if config.aliases.len() > MAX_ALIASES {
        return Err(c.fail(
            key(&["aliases"]),
            format!(
                "at most {MAX_ALIASES} aliases, not {}",
                config.aliases.len()
            ),
        ));
    }
    for (alias, target) in &config.aliases {
        let at = key(&["aliases", alias]);
        name(c, at.clone(), alias)?;
        name(c, at.clone(), target)?;
        if config.aliases.contains_key(target) {
            return Err(c.fail(
                at,
                format!("`{target}` is an alias itself: an alias names a model or a pool"),
            ));
        }
        if config.pool_index(target).is_none() && config.provider_for(target).is_none() {
            return Err(c.fail(at, format!("no pool or provider serves `{target}`")));
        }
    }
    Ok(())
}
