//! The MCP servers behind `/mcp` as the configuration names them
//! (`[[mcp_servers]]`, docs/mcp.md): the hub of upstream connections, the
//! API each server's tools are limited as, and the clients' sessions.
//! The tool call's path through admission and the limits is
//! `layers/mcp.rs`; the route is `routes/mcp.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use sluice_limit::ToolClassifier;
use sluice_mcp::rmcp_session::LocalSessionManager;
use sluice_mcp::{Front, Hub, ServerSpec, ServiceConfig, StreamableHttpService, Transport};
use tokio_util::sync::CancellationToken;

use crate::config::mcp::expand;
use crate::config::{Config, McpServerConfig};
use crate::error::StartError;
use crate::layers::mcp::McpGate;

/// The Streamable HTTP service of `/mcp`.
pub(crate) type Service = StreamableHttpService<Front<McpGate>, LocalSessionManager>;

/// See the module doc.
pub(crate) struct Mcp {
    /// The upstream servers.
    pub hub: Arc<Hub>,
    /// Which API each server's tools call.
    routes: BTreeMap<String, Route>,
    /// The SDK's Streamable HTTP service, made once: each request finds
    /// its tenant and the gateway's state in its own extensions, and the
    /// clients' sessions live in it, across requests.
    pub service: Service,
    /// Cancelled at shutdown: sessions end, and their streams with them.
    stop: CancellationToken,
}

#[derive(Debug)]
struct Route {
    api: Option<String>,
    tools: BTreeMap<String, String>,
}

impl std::fmt::Debug for Mcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The SDK's service has no `Debug` of its own.
        f.debug_struct("Mcp")
            .field("hub", &self.hub)
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Mcp {
    /// The servers `config` names, none connected yet; `None` without
    /// any. Connecting starts in the background.
    ///
    /// # Errors
    /// [`StartError::McpServer`] naming the key of a variable that is not
    /// set or a header that cannot be sent.
    pub(crate) fn build(config: &Config) -> Result<Option<Arc<Mcp>>, StartError> {
        if config.mcp_servers.is_empty() {
            return Ok(None);
        }
        let mut specs = Vec::with_capacity(config.mcp_servers.len());
        let mut routes = BTreeMap::new();
        for (i, s) in config.mcp_servers.iter().enumerate() {
            specs.push(spec(config, i, s)?);
            routes.insert(
                s.name.clone(),
                Route {
                    api: s.api.clone(),
                    tools: s.tools.clone(),
                },
            );
        }
        let hub = Arc::new(Hub::new(specs));
        let warm = Arc::clone(&hub);
        tokio::spawn(async move { warm.warm().await });
        let stop = CancellationToken::new();
        let mut service = ServiceConfig::default();
        service.cancellation_token = stop.clone();
        service.allowed_hosts.clone_from(&config.mcp.allowed_hosts);
        service.max_request_body_bytes = config.max_body_bytes;
        // A request served without a session (protocol 2026-07-28) whose
        // handler sends nothing before its answer is answered as one JSON
        // body, not an event stream: one write and no stream to read on
        // the client's side. Progress still comes as an event stream.
        service.json_response = true;
        let service = sluice_mcp::service(Arc::clone(&hub), Arc::new(McpGate), service);
        Ok(Some(Arc::new(Mcp {
            hub,
            routes,
            service,
            stop,
        })))
    }

    /// The API a call of `tool` on `server` is limited as: the server's
    /// `tools` entry, else its `api`, else the tool name's prefix.
    pub(crate) fn api_of<'a>(
        &'a self,
        classifier: &'a ToolClassifier,
        server: &str,
        tool: &str,
    ) -> Option<&'a str> {
        let route = self.routes.get(server);
        route
            .and_then(|r| r.tools.get(tool).or(r.api.as_ref()))
            .map(String::as_str)
            .or_else(|| classifier.classify(tool))
    }
}

/// The upstream of `mcp_servers[i]`, its variables expanded.
fn spec(config: &Config, i: usize, s: &McpServerConfig) -> Result<ServerSpec, StartError> {
    let lookup = |var: &str| config.secrets.get(var).map(|v| v.to_string());
    let fail = |key: String, message: String| StartError::McpServer { key, message };
    let expanded = |table: &str, name: &str, value: &str| {
        expand(value, lookup).map_err(|var| {
            fail(
                format!("mcp_servers[{i}].{table}.{name}"),
                format!("environment variable {var} is not set"),
            )
        })
    };
    let transport = match (&s.url, &s.command) {
        (Some(url), _) => {
            let mut headers = Vec::with_capacity(s.headers.len());
            for (name, value) in &s.headers {
                let key = || format!("mcp_servers[{i}].headers.{name}");
                let v = expanded("headers", name, value)?;
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| fail(key(), e.to_string()))?;
                let mut value =
                    HeaderValue::from_str(&v).map_err(|e| fail(key(), e.to_string()))?;
                value.set_sensitive(true);
                headers.push((name, value));
            }
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
        (None, Some(command)) => {
            let mut env = Vec::with_capacity(s.env.len());
            for (name, value) in &s.env {
                env.push((name.clone(), expanded("env", name, value)?));
            }
            let (program, args) = command.split_first().ok_or_else(|| {
                fail(
                    format!("mcp_servers[{i}].command"),
                    "must name a program".into(),
                )
            })?;
            Transport::Stdio {
                program: program.clone(),
                args: args.to_vec(),
                env,
            }
        }
        (None, None) => {
            return Err(fail(
                format!("mcp_servers[{i}]"),
                "set exactly one of `url` and `command`".into(),
            ));
        }
    };
    Ok(ServerSpec {
        name: s.name.clone(),
        transport,
        connect_timeout: Duration::from_millis(s.connect_timeout_ms),
    })
}
