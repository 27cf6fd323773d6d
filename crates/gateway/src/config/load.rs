//! Loading the configuration: the built-in defaults, then the file, then the
//! environment, then checks. Every error names the key and where its value
//! came from.
//!
//! The layers are merged as TOML values before anything is typed, and each
//! value set by the file or the environment is recorded with its origin
//! ([`Origins`]), so that an error found later (by serde or by the checks)
//! can still say "in sluice.toml" or "from environment variable …".
//!
//! Why not `figment` (examined for issue 12): its providers merge arrays by
//! replacing or concatenating them, while here `[[providers]]`,
//! `[[models]]`, `[[apis]]` and `[[tenants]]` entries of the file merge
//! into the defaults' entry of the same name ([`merge`]), so a user can
//! change one provider's limit without restating the table; doing that
//! through figment would take a custom provider of about the size of
//! `merge.rs` and `origins.rs` together, for a second dependency tree.

mod annotate;
mod env;
mod error;
mod merge;
mod origins;
pub(crate) mod validate;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::Config;
use super::secrets::{Secrets, credential_vars};
use error::type_error;
use origins::{KeyPath, Origins, Seg, key_path, show};

pub use error::{ConfigError, Source};

/// What `to_toml` prints in place of a secret.
const REDACTED: &str = "<redacted>";

/// Loads the configuration: the defaults, the file at `path` if any, then
/// overrides from the process environment (`SLUICE_…` and the seed's
/// variables), then checks it.
///
/// # Errors
/// A [`ConfigError`] naming the key and its source: the file cannot be read
/// or parsed, a key is unknown, a value has the wrong type or fails a check.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    load_with_origins(path).map(|(config, _)| config)
}

/// [`load`], written out as [`Config::to_toml`] with each value's origin
/// at the end of its line (`# default`, `# file sluice.toml`,
/// `# env SLUICE_REDIS__URL`): what `sluice check-config` prints.
///
/// # Errors
/// As [`load`].
pub fn explain(path: Option<&Path>) -> Result<String, ConfigError> {
    let (config, origins) = load_with_origins(path)?;
    Ok(annotate::origins(&config.to_toml(), &origins))
}

fn load_with_origins(path: Option<&Path>) -> Result<(Config, Origins), ConfigError> {
    // Variables that are not Unicode cannot be settings; skip rather than
    // panic as `std::env::vars` would.
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())));
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            let origin = Source::File(path.to_owned());
            build(Some((parse(&text, &origin)?, origin)), env)
        }
        None => build(None, env),
    }
}

/// Loads the configuration from TOML text (named `source_name` in errors)
/// and the given environment, which replaces the process's: tests pass
/// their own.
///
/// # Errors
/// As [`load`], except that nothing is read from disk.
pub fn load_str(
    toml: &str,
    source_name: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let origin = Source::File(PathBuf::from(source_name));
    let table = parse(toml, &origin)?;
    build(Some((table, origin)), env).map(|(config, _)| config)
}

impl Config {
    /// The configuration as TOML, for `sluice check-config`: every setting
    /// in force, with the admin token and inline tenant keys shown as
    /// `<redacted>`, and credentials kept in variables shown by the
    /// variable's name only (their values are in [`Config::secrets`], which
    /// is never written). Loading the output gives this configuration back
    /// (secrets aside).
    ///
    /// # Panics
    /// If a number does not fit TOML's 64-bit signed integers, which no
    /// loaded configuration holds.
    pub fn to_toml(&self) -> String {
        let mut table = Table::try_from(self).expect("the configuration serializes to TOML");
        if self.admin_token.is_some() {
            table.insert("admin_token".into(), REDACTED.into());
        }
        if let (Some(_), Some(Value::Table(metrics))) =
            (&self.metrics.token, table.get_mut("metrics"))
        {
            metrics.insert("token".into(), REDACTED.into());
        }
        if let (Some(_), Some(Value::Table(ui))) = (&self.ui.token, table.get_mut("ui")) {
            ui.insert("token".into(), REDACTED.into());
        }
        if let Some(Value::Table(jobs)) = table.get_mut("jobs") {
            jobs.insert(
                "store".into(),
                super::jobs::redact_url(&self.jobs.store).into(),
            );
        }
        for (section, store) in [("keys", &self.keys.store), ("audit", &self.audit.store)] {
            if let Some(Value::Table(t)) = table.get_mut(section) {
                t.insert("store".into(), super::jobs::redact_url(store).into());
            }
        }
        if let (Some(redis), Some(Value::Table(written))) = (&self.redis, table.get_mut("redis")) {
            written.insert("url".into(), super::jobs::redact_url(&redis.url).into());
        }
        if let Some(Value::Array(tenants)) = table.get_mut("tenants") {
            for (tenant, written) in self.tenants.iter().zip(tenants) {
                if let (Some(_), Value::Table(written)) = (&tenant.api_key, written) {
                    written.insert("api_key".into(), REDACTED.into());
                }
            }
        }
        toml::to_string(&table).expect("a TOML table serializes")
    }
}

fn parse(text: &str, origin: &Source) -> Result<Table, ConfigError> {
    text.parse::<Table>().map_err(|e| {
        let at = e.span().map_or(0, |s| s.start).min(text.len());
        let before = text.get(..at).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        ConfigError::Syntax {
            origin: origin.clone(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            message: e.message().trim().to_owned(),
        }
    })
}

/// Merges the layers, types the result and checks it.
fn build(
    file: Option<(Table, Source)>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(Config, Origins), ConfigError> {
    let mut origins = Origins::default();
    let mut table = Table::try_from(Config::default()).expect("the defaults serialize to TOML");
    if let Some((file, origin)) = file {
        merge::merge(&mut table, file, &origin, &mut origins);
    }
    // Variables named as credentials hold secrets, not settings, even
    // when their names start with `SLUICE_`.
    let env: Vec<(String, String)> = env.into_iter().collect();
    let named = credential_vars(&table);
    let settings = env.iter().filter(|(k, _)| !named.contains(k));
    let mut overrides = env::overrides(settings.cloned())?;
    loop {
        let mut table = table.clone();
        let mut origins = origins.clone();
        let applied = overrides
            .iter()
            .map(|o| o.apply(&mut table, &mut origins))
            .collect::<Result<Vec<_>, _>>()?;
        // An override may name a variable too (`SLUICE_APIS__SLACK__AUTH_ENV`).
        let named = credential_vars(&table);
        match serde_path_to_error::deserialize::<_, Config>(Value::Table(table)) {
            Ok(mut config) => {
                config.secrets = Secrets::from_env(&named, &env);
                validate::validate(&config, &origins)?;
                return Ok((config, origins));
            }
            Err(e) => {
                let path = key_path(e.path());
                // A variable for a setting with no value to go by (an unset
                // option) was read as a number or bool; if that was the
                // wrong guess, it was meant as a string.
                if let Some(i) = applied.iter().position(|a| a.guessed && a.path == path) {
                    overrides[i].as_string = true;
                    continue;
                }
                return Err(type_error(path, e.inner().message(), &origins));
            }
        }
    }
}
