//! The sim's MCP server at `/mcp` (Streamable HTTP, the official Rust
//! SDK): the seed agents' tools ([`tools::TOOLS`]), each limited as the
//! sim's API of its name (`GMAIL_SEND_EMAIL` spends `gmail`'s requests)
//! and counted under it in `/_sim/stats` and the request log.
//!
//! A call over the API's limit is answered as an MCP server in front of a
//! real API answers it: a tool result with `isError: true` whose text
//! says `429 Too Many Requests` and when to come back, with the same
//! fields as structured content (`status`, `retry_after_ms`). Injected
//! 5xx faults are error results naming the status; a hang holds the call.
//!
//! Besides tools it offers resources and a prompt ([`content`]), so that
//! a gateway in front of it has them to pass through.

mod content;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::faults::Fault;
use crate::log::Line;
use crate::state::{Ask, Decision, Kind, Shared};
use crate::wire::body::sleep_unless_shutdown;

/// The path requests reach the server on, as the log names them.
const PATH: &str = "/mcp";

/// The tool an agent calls `api` with over MCP: its first tool that
/// writes (`gmail` → `GMAIL_SEND_EMAIL`), as the swarm's tool calls.
pub(crate) fn tool_for(api: &str) -> Option<&'static tools::Spec> {
    (tools::TOOLS.iter()).find(|t| t.api == api && !t.read_only)
}

/// The service `/mcp` routes to: a session per client, ended when
/// `stop` is cancelled (the sim's shutdown).
pub(crate) fn service(
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> StreamableHttpService<SimMcp, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = stop;
    // The sim listens where a test or the demo puts it, not only on
    // loopback names; it holds no secret to rebind to.
    config = config.disable_allowed_hosts();
    StreamableHttpService::new(
        move || {
            Ok(SimMcp {
                shared: Arc::clone(&shared),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// One client's session of the sim's MCP server.
#[derive(Debug, Clone)]
pub(crate) struct SimMcp {
    shared: Arc<Shared>,
}

impl SimMcp {
    /// The tools of the APIs the sim is configured with.
    fn offered(&self) -> impl Iterator<Item = &'static tools::Spec> + '_ {
        tools::TOOLS
            .iter()
            .filter(|t| self.shared.config.apis.contains_key(t.api))
    }
}

impl rmcp::ServerHandler for SimMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("sluice-sim", env!("CARGO_PKG_VERSION")))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut apis: Vec<&str> = self.offered().map(|t| t.api).collect();
        apis.dedup();
        Ok(ListResourcesResult::with_all_items(
            apis.into_iter().map(content::resource).collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            content::template(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let found = content::api_of(uri)
            .filter(|api| self.offered().any(|t| t.api == *api))
            .and_then(|api| Some((api, self.shared.config.apis.get(api)?)));
        let Some((api, config)) = found else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri:?}"),
                None,
            ));
        };
        Ok(ReadResourceResponse::Complete(content::read(
            uri, api, config,
        )))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![content::prompt()]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != content::COMPOSE_EMAIL {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            ));
        }
        content::compose(request.arguments.as_ref()).map(GetPromptResponse::Complete)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.offered().map(tools::Spec::tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let Some(spec) = self.offered().find(|t| t.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        };
        spec.check(request.arguments.as_ref())
            .map_err(|m| ErrorData::invalid_params(format!("{}: {m}", spec.name), None))?;
        let headers = context
            .extensions
            .get::<Parts>()
            .map(|p| p.headers.clone())
            .unwrap_or_default();
        let result = call(&self.shared, spec, request.arguments, &headers).await;
        Ok(CallToolResponse::Complete(result))
    }
}

/// One call of `spec`, decided by its API's quota and faults.
async fn call(
    shared: &Shared,
    spec: &tools::Spec,
    arguments: Option<rmcp::model::JsonObject>,
    headers: &HeaderMap,
) -> CallToolResult {
    let line = Line::new("POST", &format!("{PATH}/{}", spec.name), headers);
    let outcome = shared.decide(Ask {
        kind: Kind::Api,
        name: spec.api,
        provider: "",
        tokens_in: 0,
        max_tokens: None,
        out: crate::state::Output::Text,
        line,
    });
    match outcome.decision {
        Decision::Admitted { fault, latency, .. } => {
            let wait = match fault {
                Fault::Hang(hang) => hang,
                _ => Duration::from_millis(latency.base_ms),
            };
            let mut shutdown = shared.shutdown.clone();
            if !sleep_unless_shutdown(wait, &mut shutdown).await {
                return failed(spec, 503);
            }
            match fault {
                Fault::Error(status) => failed(spec, status),
                _ => {
                    let authorization = headers
                        .get(axum::http::header::AUTHORIZATION)
                        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
                    let body = json!({
                        "ok": true,
                        "api": spec.api,
                        "tool": spec.name,
                        "id": format!("{}-{}", spec.api, outcome.seq),
                        "echo": arguments.map_or(Value::Null, Value::Object),
                        "authorization": authorization,
                    });
                    let mut r = CallToolResult::success(vec![ContentBlock::text(body.to_string())]);
                    r.structured_content = Some(body);
                    r
                }
            }
        }
        Decision::Limited { retry_after, .. } | Decision::Forced { retry_after } => {
            let ms = retry_after.as_millis() as u64;
            let body = json!({
                "ok": false,
                "api": spec.api,
                "tool": spec.name,
                "status": 429,
                "error": "rate_limited",
                "retry_after_ms": ms,
            });
            let text = format!(
                "429 Too Many Requests: the {} API's rate limit is exceeded; retry after {ms} ms",
                spec.api
            );
            let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
            r.structured_content = Some(body);
            r
        }
        Decision::TooLarge { .. } | Decision::UnknownTarget => failed(spec, 404),
    }
}

/// The error result of a call the API failed with `status`.
fn failed(spec: &tools::Spec, status: u16) -> CallToolResult {
    let body = json!({
        "ok": false,
        "api": spec.api,
        "tool": spec.name,
        "status": status,
        "error": "upstream_error",
    });
    let text = format!("{status}: the {} API failed", spec.api);
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = Some(body);
    r
}
