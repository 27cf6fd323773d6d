//! One name per tool across every upstream: a tool keeps its own name
//! when no other server offers one of the same name; when two or more do,
//! each is listed as `{server}.{tool}`. `{server}.{tool}` is also
//! accepted for a tool whose name is unique, so a client may always be
//! explicit.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool;

/// One server's tools: its index in the hub, its name, its tools.
pub type Listed = (usize, Arc<str>, Arc<Vec<Tool>>);

/// A tool as the gateway lists it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name clients see and call.
    pub name: String,
    /// The index of its server in the hub.
    pub server: usize,
    /// Its server's name.
    pub server_name: Arc<str>,
    /// The tool as its server describes it (its own name).
    pub tool: Tool,
}

/// Every tool of every reachable server, named once.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// The catalog of `servers`' tools, in server order then each
    /// server's own order.
    pub fn build(servers: &[Listed]) -> Self {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for (_, _, tools) in servers {
            for t in tools.iter() {
                *count.entry(t.name.as_ref()).or_default() += 1;
            }
        }
        let mut catalog = Catalog::default();
        for (index, server, tools) in servers {
            for t in tools.iter() {
                let qualified = format!("{server}.{}", t.name);
                let name = if count.get(t.name.as_ref()).copied().unwrap_or(0) > 1 {
                    qualified.clone()
                } else {
                    t.name.to_string()
                };
                let at = catalog.entries.len();
                catalog.by_name.entry(qualified).or_insert(at);
                catalog.by_name.entry(name.clone()).or_insert(at);
                catalog.entries.push(Entry {
                    name,
                    server: *index,
                    server_name: Arc::clone(server),
                    tool: t.clone(),
                });
            }
        }
        catalog
    }

    /// Every tool, as listed.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The tool a client calls `name` (its listed name or
    /// `{server}.{tool}`).
    pub fn find(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::JsonObject;

    fn tools(names: &[&str]) -> Arc<Vec<Tool>> {
        Arc::new(
            names
                .iter()
                .map(|n| Tool::new(n.to_string(), "t", Arc::new(JsonObject::new())))
                .collect(),
        )
    }

    #[test]
    fn colliding_names_are_qualified_unique_ones_kept() {
        let catalog = Catalog::build(&[
            (0, "sim".into(), tools(&["GMAIL_SEND_EMAIL", "search"])),
            (1, "docs".into(), tools(&["search", "read"])),
        ]);
        let names: Vec<&str> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["GMAIL_SEND_EMAIL", "sim.search", "docs.search", "read"]
        );
        assert_eq!(catalog.find("sim.search").unwrap().server, 0);
        assert_eq!(catalog.find("docs.search").unwrap().tool.name, "search");
        assert_eq!(catalog.find("sim.GMAIL_SEND_EMAIL").unwrap().server, 0);
        assert_eq!(catalog.find("GMAIL_SEND_EMAIL").unwrap().server, 0);
        assert!(catalog.find("search").is_none());
        assert!(catalog.find("docs.GMAIL_SEND_EMAIL").is_none());
    }
}
