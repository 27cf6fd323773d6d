//! What a tier, a tenant or a key is allowed: rates, concurrency, models,
//! APIs, priority and fairness weight. Every field is optional; a tenant's
//! or key's own value wins over its tier's ([`Limits::over`]).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::glob;

/// The priority classes a limit may name (as `x-sluice-priority` does).
pub const PRIORITIES: &[&str] = &["high", "normal", "low"];

/// Limits and defaults of a tier, tenant or key. `None` is "not limited
/// here" (or "the tier's", before [`over`](Limits::over)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Requests per second (fractions allowed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    /// Requests per minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u64>,
    /// Tokens per minute (prompt + completion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    /// Requests in flight at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u64>,
    /// Models that may be called, as globs (`openai/*`); `None` is all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// APIs under `/proxy/{api}` that may be called, as globs; `None` is all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apis: Option<Vec<String>>,
    /// MCP tools behind `/mcp` that may be seen and called, as globs over
    /// `{server}.{tool}` (`github.*`); `None` is all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
    /// The priority of requests that send no `x-sluice-priority`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The weight in fair queuing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

/// The longest allow-list.
const MAX_GLOBS: usize = 256;

impl Limits {
    /// These limits with each unset field taken from `base` (a key's own
    /// over its tier's).
    #[must_use]
    pub fn over(&self, base: &Limits) -> Limits {
        Limits {
            requests_per_second: self.requests_per_second.or(base.requests_per_second),
            requests_per_minute: self.requests_per_minute.or(base.requests_per_minute),
            tokens_per_minute: self.tokens_per_minute.or(base.tokens_per_minute),
            max_concurrent: self.max_concurrent.or(base.max_concurrent),
            models: self.models.clone().or_else(|| base.models.clone()),
            apis: self.apis.clone().or_else(|| base.apis.clone()),
            mcp: self.mcp.clone().or_else(|| base.mcp.clone()),
            priority: self.priority.clone().or_else(|| base.priority.clone()),
            weight: self.weight.or(base.weight),
        }
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// Whether `model` is allowed (no list allows all).
    pub fn allows_model(&self, model: &str) -> bool {
        self.models.as_deref().is_none_or(|m| glob::any(m, model))
    }

    /// Whether the API `api` is allowed (no list allows all).
    pub fn allows_api(&self, api: &str) -> bool {
        self.apis.as_deref().is_none_or(|a| glob::any(a, api))
    }

    /// Whether the MCP tool `tool` of `server` is allowed (no list allows
    /// all).
    pub fn allows_tool(&self, server: &str, tool: &str) -> bool {
        self.mcp
            .as_deref()
            .is_none_or(|m| glob::any(m, &format!("{server}.{tool}")))
    }

    /// Whether any tool of MCP server `server` may be allowed, so that its
    /// resources and prompts are shown (no list allows all; see
    /// [`glob::names_server`]).
    pub fn allows_server(&self, server: &str) -> bool {
        (self.mcp.as_deref()).is_none_or(|m| m.iter().any(|p| glob::names_server(p, server)))
    }

    /// Checks every field; `prefix` is put before the field's name in the
    /// error (`limits`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the first bad field.
    pub fn validate(&self, prefix: &str) -> Result<(), Error> {
        let field = |name: &str| format!("{prefix}.{name}");
        if let Some(r) = self.requests_per_second
            && !(r.is_finite() && r > 0.0 && r <= 1e9)
        {
            return Err(Error::invalid(
                field("requests_per_second"),
                "must be a number above 0 (at most 1e9)",
            ));
        }
        for (name, v) in [
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
            ("max_concurrent", self.max_concurrent),
        ] {
            if v == Some(0) {
                return Err(Error::invalid(field(name), "must be at least 1"));
            }
        }
        for (name, list) in [
            ("models", &self.models),
            ("apis", &self.apis),
            ("mcp", &self.mcp),
        ] {
            let Some(list) = list else { continue };
            if list.len() > MAX_GLOBS {
                return Err(Error::invalid(
                    field(name),
                    format!("at most {MAX_GLOBS} patterns"),
                ));
            }
            if let Some(i) = list.iter().position(|g| g.is_empty() || g.len() > 256) {
                return Err(Error::invalid(
                    format!("{}[{i}]", field(name)),
                    "a pattern must be 1 to 256 characters",
                ));
            }
        }
        if let Some(p) = &self.priority
            && !PRIORITIES.contains(&p.as_str())
        {
            return Err(Error::invalid(
                field("priority"),
                format!("must be one of {}", PRIORITIES.join(", ")),
            ));
        }
        if self.weight == Some(0) {
            return Err(Error::invalid(field("weight"), "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_values_win_over_the_tier() {
        let tier = Limits {
            requests_per_minute: Some(60),
            models: Some(vec!["openai/*".into()]),
            ..Limits::default()
        };
        let own = Limits {
            requests_per_minute: Some(10),
            ..Limits::default()
        };
        let l = own.over(&tier);
        assert_eq!(l.requests_per_minute, Some(10));
        assert!(l.allows_model("openai/gpt-4o") && !l.allows_model("anthropic/claude"));
        assert!(Limits::default().allows_model("anything"));
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |l: Limits| l.validate("limits").unwrap_err().to_string();
        let e = bad(Limits {
            requests_per_second: Some(f64::NAN),
            ..Limits::default()
        });
        assert!(e.starts_with("limits.requests_per_second:"), "{e}");
        let e = bad(Limits {
            max_concurrent: Some(0),
            ..Limits::default()
        });
        assert!(e.starts_with("limits.max_concurrent:"), "{e}");
        let e = bad(Limits {
            models: Some(vec!["openai/*".into(), String::new()]),
            ..Limits::default()
        });
        assert!(e.starts_with("limits.models[1]:"), "{e}");
        let e = bad(Limits {
            priority: Some("urgent".into()),
            ..Limits::default()
        });
        assert!(e.starts_with("limits.priority:"), "{e}");
        let e = serde_json::from_str::<Limits>(r#"{"rpm": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `rpm`"), "{e}");
    }
}
