//! Checks of the typed configuration: what types alone cannot rule out.
//! Each failure names the key and where its value came from.

mod cache;
mod fallbacks;
pub(crate) mod jobs;
mod keys;
mod ledger;
mod lists;
mod mcp;
mod otel;
mod pools;

use std::collections::HashMap;

use super::{ConfigError, KeyPath, Origins, Seg};
use crate::config::Config;
use fallbacks::fallbacks;
use lists::{apis, models, providers, tenants};

/// `http.threads` past this is a typo, not a machine.
const MAX_THREADS: usize = 1_024;

/// Checks `config`, whose values came from `origins`.
///
/// # Errors
/// The first check that fails, as [`ConfigError::InvalidValue`].
pub(super) fn validate(config: &Config, origins: &Origins) -> Result<(), ConfigError> {
    let c = Checks { origins };
    top_level(&c, config)?;
    providers(&c, config)?;
    models(&c, config)?;
    apis(&c, config)?;
    tenants(&c, config)?;
    fallbacks(&c, config)?;
    pools::pools(&c, config)?;
    pools::aliases(&c, config)?;
    redis(&c, config)?;
    jobs::jobs(&c, config)?;
    keys::keys(&c, config)?;
    keys::audit(&c, config)?;
    cache::cache(&c, config)?;
    otel::otel(&c, config)?;
    ledger::ledger(&c, config)?;
    mcp::mcp(&c, config)?;
    sections(&c, config)
}

/// `[redis]`: a Redis URL, known mode and failure names, usable times.
fn redis(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let Some(r) = &config.redis else {
        return Ok(());
    };
    let at = |k: &'static str| key(&["redis", k]);
    if !["redis://", "rediss://", "unix://", "redis+unix://"]
        .iter()
        .any(|s| r.url.starts_with(s))
    {
        return Err(c.fail(
            at("url"),
            format!(
                "must be a redis:// URL, not {:?}",
                crate::config::redact_url(&r.url)
            ),
        ));
    }
    if !["exact", "leased"].contains(&r.mode.as_str()) {
        return Err(c.fail(
            at("mode"),
            format!("must be \"exact\" or \"leased\", not {:?}", r.mode),
        ));
    }
    if !["fail_open", "fail_closed"].contains(&r.failure.as_str()) {
        return Err(c.fail(
            at("failure"),
            format!(
                "must be \"fail_open\" or \"fail_closed\", not {:?}",
                r.failure
            ),
        ));
    }
    for (k, value, min, max) in [
        ("timeout_ms", r.timeout_ms, 1, 60_000),
        ("lease_ttl_ms", r.lease_ttl_ms, 100, 86_400_000),
        ("block_ttl_ms", r.block_ttl_ms, 1, 60_000),
    ] {
        c.at_least(at(k), value, min)?;
        if value > max {
            return Err(c.fail(at(k), format!("must be at most {max}, not {value}")));
        }
    }
    Ok(())
}

struct Checks<'a> {
    origins: &'a Origins,
}

impl Checks<'_> {
    fn fail(&self, path: KeyPath, message: impl Into<String>) -> ConfigError {
        let (origin, key) = self.origins.locate(&path);
        ConfigError::InvalidValue {
            key,
            origin,
            message: message.into(),
        }
    }

    /// Fails at whichever of `paths` was set outside the defaults, so that
    /// a bound broken by a file names the key the file set.
    fn fail_either(&self, paths: [KeyPath; 2], message: impl Into<String>) -> ConfigError {
        let [a, b] = paths;
        let blame = if self.origins.locate(&a).0 == super::Source::Default {
            b
        } else {
            a
        };
        self.fail(blame, message)
    }

    fn at_least(&self, path: KeyPath, value: u64, min: u64) -> Result<(), ConfigError> {
        if value < min {
            return Err(self.fail(path, format!("must be at least {min}, not {value}")));
        }
        Ok(())
    }

    fn rate(&self, path: KeyPath, value: f64) -> Result<(), ConfigError> {
        if !(value.is_finite() && value > 0.0) {
            return Err(self.fail(
                path,
                format!("must be a finite number above 0, not {value}"),
            ));
        }
        Ok(())
    }

    fn not_empty(&self, path: KeyPath, value: &str) -> Result<(), ConfigError> {
        if value.is_empty() {
            return Err(self.fail(path, "must not be empty"));
        }
        Ok(())
    }

    fn base_url(&self, path: KeyPath, value: &str) -> Result<(), ConfigError> {
        base_url_problem(value).map_or(Ok(()), |problem| Err(self.fail(path, problem)))
    }

    /// Fails at the second of two entries with the same `name`.
    fn unique<'v>(
        &self,
        what: &str,
        names: impl Iterator<Item = (KeyPath, &'v str)>,
    ) -> Result<(), ConfigError> {
        let mut seen = HashMap::new();
        for (path, name) in names {
            if let Some(first) = seen.insert(name, path.clone()) {
                let (_, first) = self.origins.locate(&first);
                return Err(self.fail(path, format!("{what} `{name}` is also at `{first}`")));
            }
        }
        Ok(())
    }
}

/// `a.b.c` as a path.
fn key(keys: &[&str]) -> KeyPath {
    keys.iter().map(|k| Seg::Key((*k).to_owned())).collect()
}

/// `list[index].field` (or `list[index]` for an empty field).
fn item(list: &str, index: usize, field: &str) -> KeyPath {
    let mut path = vec![Seg::Key(list.to_owned()), Seg::Index(index)];
    if !field.is_empty() {
        path.push(Seg::Key(field.to_owned()));
    }
    path
}

/// What is wrong with an upstream base URL, if anything. The URL itself is
/// not repeated: a malformed one may hold a key.
fn base_url_problem(value: &str) -> Option<String> {
    let url = match url::Url::parse(value) {
        Ok(url) => url,
        Err(e) => return Some(format!("is not a URL: {e}")),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Some(format!(
            "must be an http or https URL, not {}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Some("has no host".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Some("must not have a query or fragment".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials in a URL end up in logs; keys belong in variables.
        return Some("must not hold credentials; name a variable in `api_key_env`".into());
    }
    None
}

fn top_level(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    c.not_empty(key(&["data_dir"]), &config.data_dir.to_string_lossy())?;
    if let Some(token) = &config.admin_token {
        c.not_empty(key(&["admin_token"]), token)?;
    }
    c.at_least(key(&["max_body_bytes"]), config.max_body_bytes as u64, 1)?;
    c.at_least(key(&["default_timeout_ms"]), config.default_timeout_ms, 1)?;
    c.at_least(key(&["max_timeout_ms"]), config.max_timeout_ms, 1)?;
    if config.default_timeout_ms > config.max_timeout_ms {
        return Err(c.fail_either(
            [key(&["default_timeout_ms"]), key(&["max_timeout_ms"])],
            format!(
                "default_timeout_ms ({}) must not exceed max_timeout_ms ({})",
                config.default_timeout_ms, config.max_timeout_ms
            ),
        ));
    }
    Ok(())
}

fn sections(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let s = &config.sessions;
    c.at_least(key(&["sessions", "requests"]), s.requests, 1)?;
    c.at_least(key(&["sessions", "window_seconds"]), s.window_seconds, 1)?;

    let r = &config.retry;
    c.at_least(
        key(&["retry", "max_attempts"]),
        u64::from(r.max_attempts),
        1,
    )?;
    c.at_least(
        key(&["retry", "attempt_timeout_ms"]),
        r.attempt_timeout_ms,
        1,
    )?;
    if r.min_time_left_ms >= config.default_timeout_ms {
        return Err(c.fail_either(
            [
                key(&["retry", "min_time_left_ms"]),
                key(&["default_timeout_ms"]),
            ],
            format!(
                "min_time_left_ms ({}) must be less than default_timeout_ms ({}): \
                 no call would ever be sent",
                r.min_time_left_ms, config.default_timeout_ms
            ),
        ));
    }
    if r.initial_backoff_ms > r.max_backoff_ms {
        return Err(c.fail_either(
            [
                key(&["retry", "initial_backoff_ms"]),
                key(&["retry", "max_backoff_ms"]),
            ],
            format!(
                "initial_backoff_ms ({}) must not exceed max_backoff_ms ({})",
                r.initial_backoff_ms, r.max_backoff_ms
            ),
        ));
    }

    let t = &config.tokens;
    c.at_least(
        key(&["tokens", "default_max_tokens"]),
        t.default_max_tokens,
        1,
    )?;
    c.at_least(key(&["tokens", "chars_per_token"]), t.chars_per_token, 1)?;
    c.at_least(key(&["tokens", "max_call_tokens"]), t.max_call_tokens, 1)?;
    if !(0.0..=1.0).contains(&t.cut_stream_share) {
        return Err(c.fail(
            key(&["tokens", "cut_stream_share"]),
            format!("must be from 0 to 1, not {}", t.cut_stream_share),
        ));
    }

    let a = &config.adaptive;
    if !(a.reduce_factor > 0.0 && a.reduce_factor < 1.0) {
        return Err(c.fail(
            key(&["adaptive", "reduce_factor"]),
            format!(
                "must be between 0 and 1 (exclusive), not {}",
                a.reduce_factor
            ),
        ));
    }
    if !(a.recovery_factor > 1.0 && a.recovery_factor.is_finite()) {
        return Err(c.fail(
            key(&["adaptive", "recovery_factor"]),
            format!("must be a finite number above 1, not {}", a.recovery_factor),
        ));
    }
    c.at_least(
        key(&["adaptive", "recovery_interval_seconds"]),
        a.recovery_interval_seconds,
        1,
    )?;
    c.at_least(key(&["adaptive", "strikes"]), u64::from(a.strikes), 1)?;
    if a.jitter_margin_ms > 10_000 {
        return Err(c.fail(
            key(&["adaptive", "jitter_margin_ms"]),
            format!("must be at most 10000 (10 s), not {}", a.jitter_margin_ms),
        ));
    }
    if a.max_jitter_margin_ms < a.jitter_margin_ms {
        return Err(c.fail(
            key(&["adaptive", "max_jitter_margin_ms"]),
            format!(
                "must be at least jitter_margin_ms ({}), not {}",
                a.jitter_margin_ms, a.max_jitter_margin_ms
            ),
        ));
    }

    c.at_least(
        key(&["limits_api", "lease_ttl_ms"]),
        config.limits_api.lease_ttl_ms,
        1,
    )?;
    c.at_least(
        key(&["limits_api", "max_held_per_tenant"]),
        config.limits_api.max_held_per_tenant as u64,
        1,
    )?;
    c.at_least(
        key(&["limits_api", "max_settle_multiple"]),
        config.limits_api.max_settle_multiple,
        1,
    )?;
    let t = &config.trace;
    c.at_least(key(&["trace", "buffer"]), t.buffer as u64, 1)?;
    c.at_least(key(&["trace", "max_file_bytes"]), t.max_file_bytes, 1)?;
    c.at_least(key(&["trace", "max_files"]), t.max_files as u64, 1)?;
    c.at_least(
        key(&["trace", "max_open_files"]),
        t.max_open_files as u64,
        1,
    )?;
    if t.max_total_bytes < t.max_file_bytes {
        return Err(c.fail_either(
            [
                key(&["trace", "max_total_bytes"]),
                key(&["trace", "max_file_bytes"]),
            ],
            format!(
                "max_total_bytes ({}) must be at least max_file_bytes ({}): \
                 the directory must hold one whole file",
                t.max_total_bytes, t.max_file_bytes
            ),
        ));
    }
    let h = &config.http;
    c.at_least(
        key(&["http", "header_read_timeout_ms"]),
        h.header_read_timeout_ms,
        1,
    )?;
    c.at_least(
        key(&["http", "body_read_timeout_ms"]),
        h.body_read_timeout_ms,
        1,
    )?;
    c.at_least(key(&["http", "write_timeout_ms"]), h.write_timeout_ms, 1)?;
    c.at_least(
        key(&["http", "max_connections"]),
        h.max_connections as u64,
        1,
    )?;
    if h.threads > MAX_THREADS {
        return Err(c.fail(
            key(&["http", "threads"]),
            format!(
                "must be at most {MAX_THREADS} (0: one per CPU), not {}",
                h.threads
            ),
        ));
    }
    c.at_least(
        key(&["metrics", "refresh_interval_ms"]),
        config.metrics.refresh_interval_ms,
        1,
    )?;
    if let Some(token) = &config.metrics.token {
        c.not_empty(key(&["metrics", "token"]), token)?;
    }
    let ui = &config.ui;
    c.at_least(key(&["ui", "history_seconds"]), ui.history_seconds, 10)?;
    if ui.history_seconds > 3_600 {
        return Err(c.fail(
            key(&["ui", "history_seconds"]),
            format!("must be at most 3600, not {}", ui.history_seconds),
        ));
    }
    c.at_least(key(&["ui", "max_streams"]), ui.max_streams as u64, 1)?;
    if let Some(token) = &ui.token {
        c.not_empty(key(&["ui", "token"]), token)?;
        if ui.token_env.is_some() {
            return Err(c.fail(
                key(&["ui", "token_env"]),
                "give ui.token or ui.token_env, not both",
            ));
        }
    }
    if let Some(var) = &ui.token_env {
        c.not_empty(key(&["ui", "token_env"]), var)?;
    }
    if let Some(dir) = &config.trace.dir {
        c.not_empty(key(&["trace", "dir"]), &dir.to_string_lossy())?;
    }
    Ok(())
}
