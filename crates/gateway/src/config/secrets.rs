//! The values of the variables the configuration names for credentials,
//! read once, from the environment the configuration was loaded with.
//!
//! The configuration itself holds only variable names (`api_key_env`,
//! `auth_env`): they are what `sluice check-config` prints. The values
//! live here, never serialized, and their `Debug` shows names only.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use toml::{Table, Value};

/// Variable name → value, for the variables the configuration names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(BTreeMap<String, Arc<str>>);

impl Secrets {
    /// The value of `var`, if it was set when the configuration was loaded.
    pub fn get(&self, var: &str) -> Option<&Arc<str>> {
        self.0.get(var)
    }

    /// Sets `var`, for a configuration built in code rather than loaded.
    pub fn insert(&mut self, var: impl Into<String>, value: impl Into<Arc<str>>) {
        self.0.insert(var.into(), value.into());
    }

    /// The variables in `named`, taken from `env`; every other variable
    /// is left alone.
    pub(super) fn from_env<'a>(
        named: &[String],
        env: impl IntoIterator<Item = &'a (String, String)>,
    ) -> Secrets {
        Secrets(
            env.into_iter()
                // An empty variable holds no credential: as unset.
                .filter(|(k, v)| named.contains(k) && !v.trim().is_empty())
                .map(|(k, v)| (k.clone(), Arc::from(v.as_str())))
                .collect(),
        )
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The keys whose value names a credential's variable.
const CREDENTIAL_KEYS: &[&str] = &["api_key_env", "auth_env", "token_env", "secret_env"];

/// Every variable a configuration (as TOML, before it is typed) names for
/// a credential: providers' and APIs' shared ones, tenants' keys, and
/// tenants' own upstream credentials, wherever they are written.
pub(super) fn credential_vars(table: &Table) -> Vec<String> {
    fn walk(value: &Value, key: Option<&str>, out: &mut Vec<String>) {
        match value {
            Value::String(var) if key.is_some_and(|k| CREDENTIAL_KEYS.contains(&k)) => {
                out.push(var.clone());
            }
            Value::Table(t) => t.iter().for_each(|(k, v)| walk(v, Some(k), out)),
            Value::Array(list) => list.iter().for_each(|v| walk(v, None, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    table.iter().for_each(|(k, v)| walk(v, Some(k), &mut out));
    // `[[mcp_servers]]` headers and env name theirs as `${VAR}`.
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.extend(super::mcp::vars_in(s).map(str::to_owned)),
            Value::Table(t) => t.values().for_each(|v| refs(v, out)),
            Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    if let Some(Value::Array(servers)) = table.get("mcp_servers") {
        for server in servers.iter().filter_map(Value::as_table) {
            for key in ["headers", "env"] {
                if let Some(v) = server.get(key) {
                    refs(v, &mut out);
                }
            }
        }
    }
    out
}
