//! One name per tool (and per prompt) across every upstream: a tool keeps
//! its own name when no other server offers one of the same name; when
//! two or more do, each is listed as `{server}.{tool}`. `{server}.{tool}`
//! is also accepted for a tool whose name is unique, so a client may
//! always be explicit. Prompts are named by the same rule.
//!
//! Resources keep their URIs ([`Resources`]): a URI two servers list is
//! read from the first server in configuration order (the other's is not
//! listed; a warning says so), and a URI no server lists goes to the
//! server whose resource template matches it.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};

/// One server's tools (or prompts): its index in the hub, its name, its
/// items.
pub type Listed<T = Tool> = (usize, Arc<str>, Arc<Vec<T>>);

/// Something a server offers under a name a client calls it by.
pub trait Named: Clone {
    /// Its name on its server.
    fn name(&self) -> &str;
    /// The same, named `name` (as the gateway lists it).
    fn renamed(&self, name: &str) -> Self;
}

impl Named for Tool {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: &str) -> Self {
        let mut t = self.clone();
        t.name = name.to_owned().into();
        t
    }
}

impl Named for Prompt {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: &str) -> Self {
        let mut p = self.clone();
        p.name = name.to_owned();
        p
    }
}

/// A tool (or prompt) as the gateway lists it.
#[derive(Debug, Clone)]
pub struct Entry<T = Tool> {
    /// The name clients see and call.
    pub name: String,
    /// The index of its server in the hub.
    pub server: usize,
    /// Its server's name.
    pub server_name: Arc<str>,
    /// The item as its server describes it (its own name).
    pub item: T,
}

impl<T: Named> Entry<T> {
    /// The item under the name clients see.
    pub fn listed(&self) -> T {
        self.item.renamed(&self.name)
    }
}

/// Every tool (or prompt) of every reachable server, named once.
#[derive(Debug)]
pub struct Catalog<T = Tool> {
    entries: Vec<Entry<T>>,
    by_name: HashMap<String, usize>,
}

impl<T> Default for Catalog<T> {
    fn default() -> Self {
        Catalog {
            entries: Vec::new(),
            by_name: HashMap::new(),
        }
    }
}

impl<T: Named> Catalog<T> {
    /// The catalog of `servers`' items, in server order then each
    /// server's own order.
    pub fn build(servers: &[Listed<T>]) -> Self {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for (_, _, items) in servers {
            for t in items.iter() {
                *count.entry(t.name()).or_default() += 1;
            }
        }
        let mut catalog = Catalog::default();
        for (index, server, items) in servers {
            for t in items.iter() {
                let qualified = format!("{server}.{}", t.name());
                let name = if count.get(t.name()).copied().unwrap_or(0) > 1 {
                    qualified.clone()
                } else {
                    t.name().to_owned()
                };
                let at = catalog.entries.len();
                catalog.by_name.entry(qualified).or_insert(at);
                catalog.by_name.entry(name.clone()).or_insert(at);
                catalog.entries.push(Entry {
                    name,
                    server: *index,
                    server_name: Arc::clone(server),
                    item: t.clone(),
                });
            }
        }
        catalog
    }

    /// Every item, as listed.
    pub fn entries(&self) -> &[Entry<T>] {
        &self.entries
    }

    /// The item a client calls `name` (its listed name or
    /// `{server}.{name}`).
    pub fn find(&self, name: &str) -> Option<&Entry<T>> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }
}

/// One server's resources and resource templates.
pub type ListedResources = (
    usize,
    Arc<str>,
    Arc<Vec<Resource>>,
    Arc<Vec<ResourceTemplate>>,
);

/// Every resource and resource template of every reachable server, and
/// which server a URI is read from (see the module doc).
#[derive(Debug, Default)]
pub struct Resources {
    /// `(server index, server name, resource)`, as listed.
    pub resources: Vec<(usize, Arc<str>, Resource)>,
    /// `(server index, server name, template)`, as listed.
    pub templates: Vec<(usize, Arc<str>, ResourceTemplate)>,
    by_uri: HashMap<String, usize>,
}

impl Resources {
    /// The resources of `servers`, in server order.
    pub fn build(servers: &[ListedResources]) -> Self {
        let mut out = Resources::default();
        for (index, server, resources, templates) in servers {
            for r in resources.iter() {
                if out.by_uri.contains_key(&r.uri) {
                    tracing::warn!(server = %server, uri = %r.uri, "mcp: a resource URI an earlier server lists too is not listed");
                    continue;
                }
                out.by_uri.insert(r.uri.clone(), out.resources.len());
                out.resources.push((*index, Arc::clone(server), r.clone()));
            }
            for t in templates.iter() {
                out.templates.push((*index, Arc::clone(server), t.clone()));
            }
        }
        out
    }

    /// The server (index, name) `uri` is read from: the one that lists
    /// it, else the one whose template's fixed start (before its first
    /// `{`) is the longest start of `uri`.
    pub fn route(&self, uri: &str) -> Option<(usize, Arc<str>)> {
        if let Some(&i) = self.by_uri.get(uri) {
            let (server, name, _) = &self.resources[i];
            return Some((*server, Arc::clone(name)));
        }
        self.templates
            .iter()
            .filter_map(|(server, name, t)| {
                let fixed = t.uri_template.split('{').next().unwrap_or_default();
                (!fixed.is_empty() && uri.starts_with(fixed)).then_some((fixed.len(), server, name))
            })
            .max_by_key(|(len, server, _)| (*len, std::cmp::Reverse(**server)))
            .map(|(_, server, name)| (*server, Arc::clone(name)))
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
        assert_eq!(catalog.find("docs.search").unwrap().item.name, "search");
        assert_eq!(
            catalog.find("docs.search").unwrap().listed().name,
            "docs.search"
        );
        assert_eq!(catalog.find("sim.GMAIL_SEND_EMAIL").unwrap().server, 0);
        assert_eq!(catalog.find("GMAIL_SEND_EMAIL").unwrap().server, 0);
        assert!(catalog.find("search").is_none());
        assert!(catalog.find("docs.GMAIL_SEND_EMAIL").is_none());
    }

    #[test]
    fn prompts_are_named_as_tools_are() {
        let p = |n: &str| Prompt::new(n, Some("p"), None);
        let catalog = Catalog::build(&[
            (0, "sim".into(), Arc::new(vec![p("draft_email")])),
            (
                1,
                "local".into(),
                Arc::new(vec![p("draft_email"), p("review")]),
            ),
        ]);
        let names: Vec<&str> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["sim.draft_email", "local.draft_email", "review"]);
        assert_eq!(catalog.find("local.review").unwrap().server, 1);
    }

    #[test]
    fn a_uri_goes_to_the_server_that_lists_it_else_its_template() {
        let r = |u: &str| Resource::new(u, u);
        let t = |u: &str| ResourceTemplate::new(u, u);
        let resources = Resources::build(&[
            (
                0,
                "sim".into(),
                Arc::new(vec![r("sim://apis/gmail"), r("file:///shared")]),
                Arc::new(vec![t("sim://apis/{api}")]),
            ),
            (
                1,
                "local".into(),
                Arc::new(vec![r("file:///shared"), r("local://notes")]),
                Arc::new(vec![t("sim://apis/x/{id}"), t("{anything}")]),
            ),
        ]);
        let uris: Vec<&str> = (resources.resources.iter())
            .map(|(_, _, r)| r.uri.as_str())
            .collect();
        assert_eq!(
            uris,
            ["sim://apis/gmail", "file:///shared", "local://notes"]
        );
        let server = |uri: &str| resources.route(uri).map(|(i, _)| i);
        assert_eq!(server("file:///shared"), Some(0));
        assert_eq!(server("local://notes"), Some(1));
        assert_eq!(server("sim://apis/slack"), Some(0));
        // The longer fixed start wins; a template of no fixed start
        // matches nothing.
        assert_eq!(server("sim://apis/x/1"), Some(1));
        assert_eq!(server("other://x"), None);
    }
}
