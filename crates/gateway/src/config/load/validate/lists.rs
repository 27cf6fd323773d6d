//! Checks of the lists: providers, models, APIs and tenants.

use std::collections::HashMap;

use super::{Checks, item};
use crate::config::load::{ConfigError, Seg};
use crate::config::{Config, TenantConfig};

pub(super) fn providers(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    for (i, p) in config.providers.iter().enumerate() {
        c.not_empty(item("providers", i, "name"), &p.name)?;
        if p.name.contains('/') {
            return Err(c.fail(item("providers", i, "name"), "must not contain `/`"));
        }
        c.base_url(item("providers", i, "base_url"), &p.base_url)?;
        if let Some(var) = &p.api_key_env {
            c.not_empty(item("providers", i, "api_key_env"), var)?;
        }
        for (j, prefix) in p.prefixes.iter().enumerate() {
            let mut path = item("providers", i, "prefixes");
            path.push(Seg::Index(j));
            c.not_empty(path, prefix)?;
        }
    }
    c.unique(
        "provider",
        (config.providers.iter().enumerate())
            .map(|(i, p)| (item("providers", i, "name"), p.name.as_str())),
    )?;
    // A model prefix routed to two providers would route by list order.
    let implicit: Vec<String> = config
        .providers
        .iter()
        .map(|p| format!("{}/", p.name))
        .collect();
    let routes = config.providers.iter().enumerate().flat_map(|(i, p)| {
        let own = (item("providers", i, "name"), implicit[i].as_str());
        let more = p.prefixes.iter().enumerate().map(move |(j, prefix)| {
            let mut path = item("providers", i, "prefixes");
            path.push(Seg::Index(j));
            (path, prefix.as_str())
        });
        std::iter::once(own).chain(more)
    });
    c.unique("model prefix", routes)
}

pub(super) fn models(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    for (i, m) in config.models.iter().enumerate() {
        c.rate(
            item("models", i, "requests_per_second"),
            m.requests_per_second,
        )?;
        c.at_least(item("models", i, "burst"), m.burst, 1)?;
        if let Some(tpm) = m.tokens_per_minute {
            c.at_least(item("models", i, "tokens_per_minute"), tpm, 1)?;
        }
        if let Some(n) = m.max_in_flight {
            c.at_least(item("models", i, "max_in_flight"), n, 1)?;
        }
    }
    c.unique(
        "prefix",
        (config.models.iter().enumerate())
            .map(|(i, m)| (item("models", i, "prefix"), m.prefix.as_str())),
    )
}

pub(super) fn apis(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    for (i, a) in config.apis.iter().enumerate() {
        let path_safe = a
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.' | '~'));
        if a.name.is_empty() || !path_safe || a.name == "." || a.name == ".." {
            return Err(c.fail(
                item("apis", i, "name"),
                "must be a URL path segment: letters, digits, `_`, `-`, `.`, `~`",
            ));
        }
        c.base_url(item("apis", i, "base_url"), &a.base_url)?;
        c.rate(
            item("apis", i, "requests_per_second"),
            a.requests_per_second,
        )?;
        c.at_least(item("apis", i, "burst"), a.burst, 1)?;
        if let Some(n) = a.max_in_flight {
            c.at_least(item("apis", i, "max_in_flight"), n, 1)?;
        }
        if let Some(var) = &a.auth_env {
            c.not_empty(item("apis", i, "auth_env"), var)?;
        }
    }
    c.unique(
        "api",
        (config.apis.iter().enumerate()).map(|(i, a)| (item("apis", i, "name"), a.name.as_str())),
    )?;
    // Tool prefixes match case-insensitively, so compare them uppercased.
    let upper: Vec<Vec<String>> = (config.apis.iter())
        .map(|a| {
            a.tool_prefixes
                .iter()
                .map(|p| p.to_ascii_uppercase())
                .collect()
        })
        .collect();
    for (i, prefixes) in upper.iter().enumerate() {
        for (j, p) in prefixes.iter().enumerate() {
            let mut path = item("apis", i, "tool_prefixes");
            path.push(Seg::Index(j));
            c.not_empty(path, p)?;
        }
    }
    let tools = upper.iter().enumerate().flat_map(|(i, prefixes)| {
        prefixes.iter().enumerate().map(move |(j, p)| {
            let mut path = item("apis", i, "tool_prefixes");
            path.push(Seg::Index(j));
            (path, p.as_str())
        })
    });
    c.unique("tool prefix", tools)
}

pub(super) fn tenants(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    for (i, t) in config.tenants.iter().enumerate() {
        c.not_empty(item("tenants", i, "name"), &t.name)?;
        match t {
            TenantConfig {
                api_key: Some(k),
                api_key_env: None,
                ..
            } => c.not_empty(item("tenants", i, "api_key"), k)?,
            TenantConfig {
                api_key: None,
                api_key_env: Some(var),
                ..
            } => c.not_empty(item("tenants", i, "api_key_env"), var)?,
            _ => {
                return Err(c.fail(
                    item("tenants", i, ""),
                    "set exactly one of `api_key` and `api_key_env`",
                ));
            }
        }
        c.at_least(item("tenants", i, "weight"), u64::from(t.weight), 1)?;
        let apis = t.apis.iter().map(|(name, a)| (name, &a.auth_env));
        let known = config.apis.iter().map(|a| a.name.as_str());
        own_credentials(c, config, i, ("apis", "auth_env", "API"), apis, known)?;
        let providers = t.providers.iter().map(|(name, p)| (name, &p.api_key_env));
        let known = config.providers.iter().map(|p| p.name.as_str());
        own_credentials(
            c,
            config,
            i,
            ("providers", "api_key_env", "provider"),
            providers,
            known,
        )?;
    }
    let names = config.tenants.iter().enumerate();
    c.unique(
        "tenant",
        names.map(|(i, t)| (item("tenants", i, "name"), t.name.as_str())),
    )?;
    // Never name the key itself: the error may be printed or logged.
    let mut keys = HashMap::new();
    for (i, t) in config.tenants.iter().enumerate() {
        if let Some(k) = &t.api_key
            && let Some(first) = keys.insert(k.as_str(), i)
        {
            let first = c.origins.locate(&item("tenants", first, "api_key")).1;
            return Err(c.fail(
                item("tenants", i, "api_key"),
                format!("the same key as `{first}`"),
            ));
        }
    }
    let vars = config.tenants.iter().enumerate();
    c.unique(
        "key variable",
        vars.filter_map(|(i, t)| {
            Some((item("tenants", i, "api_key_env"), t.api_key_env.as_deref()?))
        }),
    )
}

/// A tenant's own credentials (`tenants[i].{table}.{name}.{field}`): each
/// for an upstream that exists, in a variable that is set now, when the
/// configuration is loaded, rather than at the first call.
fn own_credentials<'a>(
    c: &Checks<'_>,
    config: &Config,
    tenant: usize,
    (table, field, what): (&str, &str, &str),
    own: impl Iterator<Item = (&'a String, &'a String)>,
    known: impl Iterator<Item = &'a str>,
) -> Result<(), ConfigError> {
    let known: Vec<&str> = known.collect();
    for (name, var) in own {
        let mut path = item("tenants", tenant, table);
        path.push(Seg::Key(name.clone()));
        if !known.contains(&name.as_str()) {
            return Err(c.fail(
                path,
                format!("unknown {what} {name:?}: one of {}", known.join(", ")),
            ));
        }
        path.push(Seg::Key(field.to_owned()));
        c.not_empty(path.clone(), var)?;
        if config.secrets.get(var).is_none() {
            return Err(c.fail(path, format!("environment variable {var} is not set")));
        }
    }
    Ok(())
}
