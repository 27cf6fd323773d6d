//! What goes wrong while loading, and how a serde error becomes one that
//! names the key.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::origins::{KeyPath, Origins, Seg};

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The config file at this path.
    File(PathBuf),
    /// This environment variable.
    Env(String),
    /// The built-in defaults.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "in {}", path.display()),
            Source::Env(var) => write!(f, "from environment variable {var}"),
            Source::Default => f.write_str("in the built-in defaults"),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read; the reason is in the message because the
    /// CLI prints only the message.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is not valid TOML.
    #[error("syntax error {origin} at line {line}, column {column}: {message}")]
    Syntax {
        /// The file.
        origin: Source,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// A key that no setting has.
    #[error("unknown key `{key}` {origin}{}", did_you_mean(hint))]
    UnknownKey {
        /// The key's path, e.g. `retry.max_attemps`.
        key: String,
        /// Where it was written.
        origin: Source,
        /// The known key it most resembles, if any is close.
        hint: Option<String>,
    },
    /// A required key that was not given (a provider without `base_url`).
    #[error("missing key `{key}` {origin}")]
    MissingKey {
        /// The key's path, e.g. `providers[0].base_url`.
        key: String,
        /// Where its table was written.
        origin: Source,
    },
    /// A value of the wrong type, or one the checks reject.
    #[error("invalid value for `{key}` {origin}: {message}")]
    InvalidValue {
        /// The key's path, e.g. `retry.max_attempts`.
        key: String,
        /// Where the value came from.
        origin: Source,
        /// What is wrong with it.
        message: String,
    },
    /// A `SLUICE_` variable whose name cannot be a key path.
    #[error("environment variable {var} names no setting: use SLUICE_<KEY>__<SUBKEY>")]
    EnvName {
        /// The variable.
        var: String,
    },
}

impl ConfigError {
    /// The key path the error is about, if it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::MissingKey { key, .. }
            | ConfigError::InvalidValue { key, .. } => Some(key),
            ConfigError::Read { .. } | ConfigError::Syntax { .. } | ConfigError::EnvName { .. } => {
                None
            }
        }
    }

    /// Where the offending setting came from.
    pub fn origin(&self) -> Option<&Source> {
        match self {
            ConfigError::Syntax { origin, .. }
            | ConfigError::UnknownKey { origin, .. }
            | ConfigError::MissingKey { origin, .. }
            | ConfigError::InvalidValue { origin, .. } => Some(origin),
            ConfigError::Read { .. } | ConfigError::EnvName { .. } => None,
        }
    }
}

fn did_you_mean(hint: &Option<String>) -> String {
    hint.as_ref()
        .map(|h| format!("; did you mean `{h}`?"))
        .unwrap_or_default()
}

/// Turns a serde error at `path` into the error that names the key.
pub(super) fn type_error(mut path: KeyPath, message: &str, origins: &Origins) -> ConfigError {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        // serde_path_to_error's path already ends with the unknown key.
        let (origin, key) = origins.locate(&path);
        let typo = rest.split('`').next().unwrap_or_default();
        let known = rest.split("expected").nth(1).unwrap_or_default();
        return ConfigError::UnknownKey {
            key,
            origin,
            hint: closest(typo, known.split('`').skip(1).step_by(2)),
        };
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        let (origin, _) = origins.locate(&path);
        path.push(Seg::Key(field.to_owned()));
        let (_, key) = origins.locate(&path);
        return ConfigError::MissingKey { key, origin };
    }
    let (origin, key) = origins.locate(&path);
    ConfigError::InvalidValue {
        key,
        origin,
        message: message.to_owned(),
    }
}

/// The candidate within two edits of `typo`, if any (the nearest).
fn closest<'a>(typo: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    candidates
        .map(|c| (edit_distance(typo, c), c))
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c.to_owned())
}

/// Levenshtein distance, counting a swap of neighbours as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![(0..=b.len()).collect::<Vec<_>>()];
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (rows[i - 1][j] + 1)
                .min(row[j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(rows[i - 2][j - 2] + 1);
            }
        }
        rows.push(row);
    }
    rows[a.len()][b.len()]
}
