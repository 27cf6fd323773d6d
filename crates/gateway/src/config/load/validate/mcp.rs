//! Checks of `[[mcp_servers]]` and the tenants' `mcp` allow-lists: names
//! that can be a tool name's prefix, one way to reach each server,
//! headers that can be sent once their variables are set, and APIs that
//! exist.

use super::{Checks, item};
use crate::config::Config;
use crate::config::load::ConfigError;

/// The longest allow-list (as the key store's).
const MAX_GLOBS: usize = 256;

pub(super) fn mcp(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let known = |api: &str| config.apis.iter().any(|a| a.name == api);
    for (i, s) in config.mcp_servers.iter().enumerate() {
        let at = |k: &str| item("mcp_servers", i, k);
        let ok = !s.name.is_empty()
            && s.name.len() <= 64
            && s.name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-'));
        if !ok {
            return Err(c.fail(
                at("name"),
                "must be 1 to 64 letters, digits, `_` or `-` (it prefixes tool names as `{name}.{tool}`)",
            ));
        }
        match (&s.url, &s.command) {
            (Some(url), None) => {
                c.base_url(at("url"), url)?;
                if !s.env.is_empty() {
                    return Err(c.fail(
                        at("env"),
                        "is for a `command` server; a `url` server takes `headers`",
                    ));
                }
            }
            (None, Some(command)) => {
                if command.first().is_none_or(String::is_empty) {
                    return Err(c.fail(
                        at("command"),
                        "must name a program: [\"program\", \"arg\", …]",
                    ));
                }
                if !s.headers.is_empty() {
                    return Err(c.fail(
                        at("headers"),
                        "is for a `url` server; a `command` server takes `env`",
                    ));
                }
            }
            _ => {
                return Err(c.fail(
                    item("mcp_servers", i, ""),
                    "set exactly one of `url` and `command`",
                ));
            }
        }
        for (name, value) in &s.headers {
            // The value as it will be sent, its variables stood in for.
            let sample = crate::config::mcp::expand(value, |_| Some("x".into()))
                .map_err(|e| c.fail(item_key(i, "headers", name), e))?;
            if let Err(problem) = crate::config::otel::header(name, &sample) {
                return Err(c.fail(item_key(i, "headers", name), problem));
            }
        }
        for (name, value) in &s.env {
            crate::config::mcp::expand(value, |_| Some(String::new()))
                .map_err(|e| c.fail(item_key(i, "env", name), e))?;
        }
        if let Some(api) = &s.api
            && !known(api)
        {
            return Err(c.fail(at("api"), format!("names no `[[apis]]` entry: {api:?}")));
        }
        for (tool, api) in &s.tools {
            if !known(api) {
                return Err(c.fail(
                    item_key(i, "tools", tool),
                    format!("names no `[[apis]]` entry: {api:?}"),
                ));
            }
        }
        if !(1..=300_000).contains(&s.connect_timeout_ms) {
            return Err(c.fail(
                at("connect_timeout_ms"),
                format!("must be 1 to 300000, not {}", s.connect_timeout_ms),
            ));
        }
    }
    c.unique(
        "MCP server",
        (config.mcp_servers.iter().enumerate())
            .map(|(i, s)| (item("mcp_servers", i, "name"), s.name.as_str())),
    )?;
    for (i, t) in config.tenants.iter().enumerate() {
        if let Some(list) = &t.mcp
            && (list.len() > MAX_GLOBS || list.iter().any(|g| g.is_empty() || g.len() > 256))
        {
            return Err(c.fail(
                item("tenants", i, "mcp"),
                format!("must hold at most {MAX_GLOBS} globs of 1 to 256 characters"),
            ));
        }
    }
    Ok(())
}

/// `mcp_servers[i].{table}.{key}`.
fn item_key(i: usize, table: &str, key: &str) -> super::KeyPath {
    let mut path = item("mcp_servers", i, table);
    path.push(super::Seg::Key(key.to_owned()));
    path
}
