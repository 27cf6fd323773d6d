//! Which limit a resource gets: exact names, longest prefix, a fallback; and
//! which API a tool name calls.

use std::collections::HashMap;

use crate::{Error, Limit};

/// Resource names are created lazily from these rules on first use.
///
/// A name resolves to its exact rule, else to the rule of its longest
/// matching prefix, else to the fallback; with none of these it is unknown.
///
/// ```
/// use sluice_limit::{Limit, Rules};
///
/// let rules = Rules::new()
///     .prefix("openai/", Limit::per_second(3).burst(10))
///     .prefix("openai/gpt-4o", Limit::per_second(1))
///     .exact("api:github", Limit::per_second(5).burst(15));
/// assert_eq!(rules.resolve("openai/gpt-4o-mini"), Some(Limit::per_second(1)));
/// assert_eq!(rules.resolve("openai/o3"), Some(Limit::per_second(3).burst(10)));
/// assert_eq!(rules.resolve("mistral/large"), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Rules {
    exact: HashMap<String, Limit>,
    /// Longest first, so the first match is the longest.
    prefixes: Vec<(String, Limit)>,
    fallback: Option<Limit>,
}

impl Rules {
    /// No rules: every resource must be configured with `set_capacity`.
    pub fn new() -> Self {
        Rules::default()
    }

    /// The limit for exactly `name`.
    pub fn exact(mut self, name: impl Into<String>, limit: Limit) -> Self {
        self.exact.insert(name.into(), limit);
        self
    }

    /// The limit for names starting with `prefix` (longest prefix wins).
    pub fn prefix(mut self, prefix: impl Into<String>, limit: Limit) -> Self {
        let prefix = prefix.into();
        self.prefixes.retain(|(p, _)| *p != prefix);
        self.prefixes.push((prefix, limit));
        self.prefixes
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        self
    }

    /// The limit for names no other rule matches.
    pub fn fallback(mut self, limit: Limit) -> Self {
        self.fallback = Some(limit);
        self
    }

    /// The limit `name` gets.
    pub fn resolve(&self, name: &str) -> Option<Limit> {
        if let Some(l) = self.exact.get(name) {
            return Some(*l);
        }
        self.prefixes
            .iter()
            .find(|(p, _)| name.starts_with(p.as_str()))
            .map(|(_, l)| *l)
            .or(self.fallback)
    }

    /// The same rules with every limit passed through `f` (a replica's
    /// local share of shared limits, for instance).
    pub fn map(&self, f: impl Fn(Limit) -> Limit) -> Rules {
        Rules {
            exact: self.exact.iter().map(|(k, l)| (k.clone(), f(*l))).collect(),
            prefixes: self
                .prefixes
                .iter()
                .map(|(p, l)| (p.clone(), f(*l)))
                .collect(),
            fallback: self.fallback.map(&f),
        }
    }

    /// Checks every limit.
    ///
    /// # Errors
    /// The first invalid limit's error.
    pub fn validate(&self) -> Result<(), Error> {
        self.exact
            .values()
            .chain(self.prefixes.iter().map(|(_, l)| l))
            .chain(self.fallback.iter())
            .try_for_each(Limit::validate)
    }
}

/// Resource names of APIs start with this: `api:gmail`.
pub const API_PREFIX: &str = "api:";
/// Resource names of sessions start with this: `session:abc`.
pub const SESSION_PREFIX: &str = "session:";

/// The resource name of an API: `api:{api}`.
pub fn api_resource(api: &str) -> String {
    format!("{API_PREFIX}{api}")
}

/// Maps a tool name to the API it calls, by tool-name prefix.
///
/// ```
/// use sluice_limit::ToolClassifier;
///
/// let tools = ToolClassifier::new()
///     .with("GMAIL_", "gmail")
///     .with("GOOGLEMAIL_", "gmail");
/// assert_eq!(tools.classify("GMAIL_SEND_EMAIL"), Some("gmail"));
/// assert_eq!(tools.classify("googlemail_fetch"), Some("gmail"));
/// assert_eq!(tools.classify("WEB_SEARCH"), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolClassifier {
    /// (prefix, api), longest prefix first.
    prefixes: Vec<(String, String)>,
}

impl ToolClassifier {
    /// Classifies nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tool names starting with `prefix` (ASCII case-insensitive) call `api`.
    pub fn with(mut self, prefix: impl Into<String>, api: impl Into<String>) -> Self {
        let prefix = prefix.into().to_ascii_uppercase();
        self.prefixes.retain(|(p, _)| *p != prefix);
        self.prefixes.push((prefix, api.into()));
        self.prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        self
    }

    /// The API `tool` calls, if any prefix matches.
    pub fn classify(&self, tool: &str) -> Option<&str> {
        self.prefixes
            .iter()
            .find(|(p, _)| {
                tool.len() >= p.len()
                    && tool.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
            })
            .map(|(_, a)| a.as_str())
    }

    /// The `(prefix, api)` pairs, longest prefix first.
    pub fn prefixes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.prefixes.iter().map(|(p, a)| (p.as_str(), a.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Algorithm;

    #[test]
    fn longest_prefix_then_fallback() {
        let r = Rules::new()
            .fallback(Limit::per_second(2).burst(8))
            .prefix("openai/", Limit::per_second(3).burst(10))
            .prefix("openai/gpt-4o", Limit::per_second(1))
            .exact("api:github", Limit::per_second(5).burst(15))
            .prefix(API_PREFIX, Limit::per_second(2).burst(5))
            .prefix(
                SESSION_PREFIX,
                Limit::sliding_window(10, Duration::from_secs(60)),
            );
        assert_eq!(r.resolve("openai/gpt-4o-mini"), Some(Limit::per_second(1)));
        assert_eq!(r.resolve("openai/o3"), Some(Limit::per_second(3).burst(10)));
        assert_eq!(
            r.resolve("mistral/large"),
            Some(Limit::per_second(2).burst(8))
        );
        assert_eq!(
            r.resolve(&api_resource("github")),
            Some(Limit::per_second(5).burst(15))
        );
        assert_eq!(r.resolve("api:notion"), Some(Limit::per_second(2).burst(5)));
        let s = r.resolve("session:abc").unwrap();
        assert_eq!(s.kind(), Algorithm::SlidingWindow);
        assert_eq!((s.capacity(), s.window()), (10, Duration::from_secs(60)));
        assert!(r.validate().is_ok());
    }

    #[test]
    fn unknown_without_fallback() {
        let r = Rules::new().prefix("a/", Limit::per_second(1));
        assert_eq!(r.resolve("b/x"), None);
        assert!(
            Rules::new()
                .exact("x", Limit::per_second(0))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn tool_classification() {
        let t = ToolClassifier::new()
            .with("GMAIL_", "gmail")
            .with("GOOGLEMAIL_", "gmail")
            .with("GOOGLE_", "google")
            .with("slack_", "slack");
        for (tool, api) in [
            ("GMAIL_SEND", "gmail"),
            ("GOOGLEMAIL_LIST", "gmail"),
            ("GOOGLE_SEARCH", "google"),
            ("slack_post_message", "slack"),
            ("SLACK_POST_MESSAGE", "slack"),
        ] {
            assert_eq!(t.classify(tool), Some(api), "{tool}");
        }
        assert_eq!(t.classify("GMAIL"), None, "prefix includes the underscore");
        assert_eq!(t.classify("é"), None);
        let t = t.with("NOTION_", "notion");
        assert_eq!(t.classify("NOTION_PAGE"), Some("notion"));
    }
}
