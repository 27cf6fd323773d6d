//! `[[mcp_servers]]`: the MCP servers behind `/mcp` (docs/mcp.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One upstream MCP server.
///
/// ```toml
/// [[mcp_servers]]
/// name = "github"
/// command = ["npx", "-y", "@modelcontextprotocol/server-github"]
/// env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
/// api = "github"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its name: `{name}.{tool}` when tool names collide, and what
    /// allow-lists name.
    pub name: String,
    /// Its Streamable HTTP endpoint (`http://127.0.0.1:9000/mcp`); set
    /// this or `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A program and its arguments speaking MCP on stdio, spawned by the
    /// gateway (and again after it exits); set this or `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Headers sent to a `url` server (its credentials); `${VAR}` is the
    /// variable's value when the configuration is loaded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Variables set for a `command` server; `${VAR}` as in `headers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The API every tool of this server calls (an `[[apis]]` name): its
    /// limiter resource `api:{api}` paces them. Without it, a tool's API
    /// is its entry in `tools`, else the one its name's prefix says
    /// (`[[apis]] tool_prefixes`: `GMAIL_` is gmail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Tools by name → the API each calls, over `api` and the prefixes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
    /// How long connecting and the `initialize` handshake may take.
    #[serde(default = "connect_timeout_ms")]
    pub connect_timeout_ms: u64,
}

fn connect_timeout_ms() -> u64 {
    10_000
}

impl McpServerConfig {
    /// A server over Streamable HTTP at `url`, without headers, its tools
    /// classified by their names, connecting within the default time.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig {
            name: name.into(),
            url: Some(url.into()),
            command: None,
            headers: BTreeMap::new(),
            env: BTreeMap::new(),
            api: None,
            tools: BTreeMap::new(),
            connect_timeout_ms: connect_timeout_ms(),
        }
    }
}

/// `[mcp]`: the `/mcp` endpoint itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// `Host` values `/mcp` answers (DNS rebinding protection for a
    /// gateway on a developer's machine); empty: any.
    pub allowed_hosts: Vec<String>,
}

/// The names of the variables `${VAR}` in `text`.
pub(crate) fn vars_in(text: &str) -> impl Iterator<Item = &str> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// `text` with every `${VAR}` replaced by `lookup(VAR)`.
///
/// # Errors
/// The name of the first variable `lookup` does not know.
pub(crate) fn expand(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some((name, tail)) = after.split_once('}') else {
            return Err(format!("`${{` without its `}}` in {text:?}"));
        };
        out.push_str(&lookup(name).ok_or_else(|| name.to_owned())?);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_found_and_expanded() {
        let v: Vec<&str> = vars_in("Bearer ${A} and ${B_2}").collect();
        assert_eq!(v, ["A", "B_2"]);
        let look = |k: &str| (k == "A").then(|| "x".to_owned());
        assert_eq!(expand("Bearer ${A}!", look).unwrap(), "Bearer x!");
        assert_eq!(expand("${B}", look).unwrap_err(), "B");
        assert!(expand("${A", look).unwrap_err().contains("without"));
    }
}
