//! Environment overrides: `SLUICE_<KEY>__<SUBKEY>` and the seed's variables.
//!
//! A double underscore separates the levels and names are lowercased, so
//! `SLUICE_RETRY__MAX_ATTEMPTS` sets `retry.max_attempts`. In the lists of
//! providers and APIs a level names an entry (`SLUICE_PROVIDERS__OPENAI__BASE_URL`);
//! in models, a prefix without its `/` (`SLUICE_MODELS__OPENAI__BURST`).
//!
//! A value is read as the type of the value it replaces (`invalid digit`
//! for `max_attempts=five`); where there is none (an unset option) it is
//! read as a TOML number or bool, falling back to a string.

use toml::{Table, Value};

use super::merge::entry_key;
use super::{ConfigError, KeyPath, Origins, Seg, Source, show};

/// The prefix of the gateway's variables.
const PREFIX: &str = "SLUICE_";

/// `SLUICE_` variables that are not settings.
/// Variables of the test harness (`SLUICE_TEST_POSTGRES_URL`, …), which
/// `scripts/test` exports for every process it runs.
const TEST_PREFIX: &str = "SLUICE_TEST_";

const NOT_SETTINGS: &[&str] = &[
    // The config file's path, read by the CLI.
    "SLUICE_CONFIG",
    // The log level and format, read by the CLI.
    "SLUICE_LOG",
    "SLUICE_LOG_FORMAT",
    // The binary under test, read by the end-to-end tests.
    "SLUICE_BIN",
    // `sluice jobs`: the gateway to call and who calls it.
    "SLUICE_TARGET",
    "SLUICE_API_KEY",
    "SLUICE_WORKSPACE",
];

/// The seed's variables and the settings they set. A `SLUICE_` variable
/// for the same setting wins.
const SEED_VARS: &[(&str, &[&str])] = &[
    (
        "AGENT_EXECUTOR_POOL_SIZE",
        &["bulkheads", "model", "max_concurrent"],
    ),
    (
        "IO_EXECUTOR_POOL_SIZE",
        &["bulkheads", "api", "max_concurrent"],
    ),
    (
        "QUERY_EXECUTOR_POOL_SIZE",
        &["bulkheads", "default", "max_concurrent"],
    ),
    ("RATE_LIMIT_REQUESTS", &["sessions", "requests"]),
    ("RATE_LIMIT_WINDOW_SECONDS", &["sessions", "window_seconds"]),
];

/// One variable's setting.
#[derive(Debug)]
pub(super) struct Override {
    var: String,
    /// Lowercased levels, e.g. `["retry", "max_attempts"]`.
    path: Vec<String>,
    raw: String,
    /// Read the value as a string whatever it looks like.
    pub(super) as_string: bool,
}

/// Where an override landed.
#[derive(Debug)]
pub(super) struct Applied {
    /// The path in the merged configuration.
    pub(super) path: KeyPath,
    /// The value's type was guessed (nothing was there to go by).
    pub(super) guessed: bool,
}

/// The overrides in `env`, in the order they apply: the seed's variables,
/// then `SLUICE_` ones, each group sorted by name so the outcome does not
/// depend on the environment's order.
///
/// # Errors
/// [`ConfigError::EnvName`] for a `SLUICE_` name with an empty level.
pub(super) fn overrides(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<Override>, ConfigError> {
    let mut seed = Vec::new();
    let mut ours = Vec::new();
    for (var, raw) in env {
        if let Some((_, path)) = SEED_VARS.iter().find(|(v, _)| *v == var) {
            let path = path.iter().map(|&s| s.to_owned()).collect();
            seed.push(Override::new(var, path, raw));
        } else if let Some(rest) = var.strip_prefix(PREFIX)
            && !NOT_SETTINGS.contains(&var.as_str())
            && !var.starts_with(TEST_PREFIX)
        {
            let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            if path.iter().any(String::is_empty) {
                return Err(ConfigError::EnvName { var });
            }
            ours.push(Override::new(var, path, raw));
        }
    }
    seed.sort_by(|a, b| a.var.cmp(&b.var));
    ours.sort_by(|a, b| a.var.cmp(&b.var));
    seed.extend(ours);
    Ok(seed)
}

/// Where the walk down a variable's levels stands.
enum Cursor<'a> {
    Table(&'a mut Table),
    /// A list merged by entry, with its entries' key field.
    Entries(&'a mut Vec<Value>, &'static str),
}

impl Override {
    fn new(var: String, path: Vec<String>, raw: String) -> Self {
        Override {
            var,
            path,
            raw,
            as_string: false,
        }
    }

    fn source(&self) -> Source {
        Source::Env(self.var.clone())
    }

    fn unknown(&self, at: &KeyPath, rest: &[String]) -> ConfigError {
        let mut path = at.clone();
        path.extend(rest.iter().map(|s| Seg::Key(s.clone())));
        ConfigError::UnknownKey {
            key: show(&path),
            origin: self.source(),
            hint: None,
        }
    }

    /// Sets the value in `table`, recording its origin.
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] for a path through a value that is not a
    /// table or an entry that does not exist; [`ConfigError::InvalidValue`]
    /// for a value that does not parse as the type it replaces.
    pub(super) fn apply(
        &self,
        table: &mut Table,
        origins: &mut Origins,
    ) -> Result<Applied, ConfigError> {
        let (last, levels) = self.path.split_last().expect("a path has a level");
        let mut at = KeyPath::new();
        let mut cursor = Cursor::Table(table);
        for (depth, level) in levels.iter().enumerate() {
            cursor = match cursor {
                Cursor::Table(t) => {
                    at.push(Seg::Key(level.clone()));
                    let value = t.entry(level.clone()).or_insert_with(|| {
                        // A new map entry such as `bulkheads.jobs`.
                        origins.created(at.clone(), self.source(), at.clone());
                        Value::Table(Table::new())
                    });
                    match (value, entry_key(level).filter(|_| depth == 0)) {
                        (Value::Table(t), _) => Cursor::Table(t),
                        (Value::Array(list), Some(field)) => Cursor::Entries(list, field),
                        _ => return Err(self.unknown(&at, &self.path[depth + 1..])),
                    }
                }
                Cursor::Entries(list, field) => {
                    let named = |v: &Value| {
                        v.get(field).and_then(Value::as_str).is_some_and(|name| {
                            name.eq_ignore_ascii_case(level)
                                || name
                                    .strip_suffix('/')
                                    .is_some_and(|n| n.eq_ignore_ascii_case(level))
                        })
                    };
                    let Some(i) = list.iter().position(named) else {
                        return Err(self.unknown(&at, &self.path[depth..]));
                    };
                    at.push(Seg::Index(i));
                    match &mut list[i] {
                        Value::Table(t) => Cursor::Table(t),
                        _ => return Err(self.unknown(&at, &self.path[depth + 1..])),
                    }
                }
            };
        }
        let Cursor::Table(t) = cursor else {
            return Err(self.unknown(&at, &self.path[levels.len()..]));
        };
        at.push(Seg::Key(last.clone()));
        let (value, guessed) =
            self.parse_like(t.get(last))
                .map_err(|message| ConfigError::InvalidValue {
                    key: show(&at),
                    origin: self.source(),
                    message,
                })?;
        t.insert(last.clone(), value);
        origins.record(at.clone(), self.source(), at.clone());
        Ok(Applied { path: at, guessed })
    }

    /// The value, read as the type of `existing`; with nothing to go by, as
    /// a number or bool if it looks like one (`guessed`), else a string.
    fn parse_like(&self, existing: Option<&Value>) -> Result<(Value, bool), String> {
        let raw = self.raw.trim();
        if self.as_string {
            return Ok((Value::String(self.raw.clone()), false));
        }
        let value = match existing {
            None => {
                let guess = inline_value(raw).filter(|v| {
                    matches!(v, Value::Integer(_) | Value::Float(_) | Value::Boolean(_))
                });
                return Ok(match guess {
                    Some(v) => (v, true),
                    None => (Value::String(self.raw.clone()), false),
                });
            }
            Some(Value::Integer(_)) => match raw.parse::<i64>() {
                Ok(n) => Value::Integer(n),
                // A rate written as an integer in the file may still be
                // overridden with a fraction.
                Err(e) => raw
                    .parse::<f64>()
                    .map(Value::Float)
                    .map_err(|_| e.to_string())?,
            },
            Some(Value::Float(_)) => Value::Float(raw.parse::<f64>().map_err(|e| e.to_string())?),
            Some(Value::Boolean(_)) => match raw.to_ascii_lowercase().as_str() {
                "true" => Value::Boolean(true),
                "false" => Value::Boolean(false),
                _ => return Err("expected `true` or `false`".into()),
            },
            Some(Value::Array(_)) => match inline_value(raw) {
                Some(v @ Value::Array(_)) => v,
                _ => return Err(r#"expected a TOML array such as ["a", "b"]"#.into()),
            },
            Some(Value::Table(_)) => {
                return Err(format!(
                    "a table cannot be set whole; set its keys, e.g. {}__<KEY>",
                    self.var
                ));
            }
            Some(Value::String(_) | Value::Datetime(_)) => Value::String(self.raw.clone()),
        };
        Ok((value, false))
    }
}

/// `raw` as a TOML value, if it is one.
fn inline_value(raw: &str) -> Option<Value> {
    format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
}
