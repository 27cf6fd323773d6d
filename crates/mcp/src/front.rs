//! The gateway's MCP server ([`Front`]): the hub's tools as one server,
//! each message's caller and what it may see asked of the [`Gate`], and
//! every `tools/call` run by the gate. A call the client cancels is
//! dropped here, which cancels it upstream (the SDK sends
//! `notifications/cancelled`); progress the upstream reports goes back
//! to the client under its own token ([`crate::relay`]).

use std::sync::Arc;

use http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};

use crate::Hub;
use crate::gate::{Attempt, Gate, ToolCall};

/// The JSON-RPC error code of a call a policy refuses (the server's own
/// range, -32000 to -32099).
pub const POLICY_DENIED: ErrorCode = ErrorCode(-32003);

/// See the module doc.
#[derive(Debug)]
pub struct Front<G> {
    hub: Arc<Hub>,
    gate: Arc<G>,
}

impl<G> Clone for Front<G> {
    fn clone(&self) -> Self {
        Front {
            hub: Arc::clone(&self.hub),
            gate: Arc::clone(&self.gate),
        }
    }
}

impl<G: Gate> Front<G> {
    /// The front of `hub`, every call through `gate`.
    pub fn new(hub: Arc<Hub>, gate: Arc<G>) -> Self {
        Front { hub, gate }
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<G::Caller, ErrorData> {
        self.gate.caller(context.extensions.get::<Parts>())
    }
}

impl<G: Gate> rmcp::ServerHandler for Front<G> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sluice", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of the MCP servers behind this Sluice gateway; every call is \
                 queued fairly and paced to the limit of the API it reaches.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context)?;
        let catalog = self.hub.catalog().await;
        let tools = catalog
            .entries()
            .iter()
            .filter(|e| {
                self.gate
                    .allows(&caller, &e.server_name, Some(&e.tool.name))
                    .is_ok()
            })
            .map(|e| {
                let mut tool = e.tool.clone();
                tool.name = e.name.clone().into();
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context)?;
        let catalog = self.hub.catalog().await;
        let name = request.name.to_string();
        let Some(entry) = catalog.find(&name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}: `tools/list` names the tools there are"),
                None,
            ));
        };
        self.gate
            .allows(&caller, &entry.server_name, Some(&entry.tool.name))
            .map_err(|policy| ErrorData::new(POLICY_DENIED, policy, None))?;
        let upstream = Arc::clone(&self.hub.servers()[entry.server]);
        let mut params = request;
        params.name = entry.tool.name.clone();
        // The client's progress token: progress the server reports comes
        // back under it (the SDK sends a token of its own upstream).
        let token = context
            .meta
            .get_progress_token()
            .or_else(|| params.meta.as_ref().and_then(|m| m.get_progress_token()));
        let progress = token.map(|t| (context.peer.clone(), t));
        let annotations = entry.tool.annotations.as_ref();
        let call = ToolCall {
            server: Arc::clone(&entry.server_name),
            tool: entry.tool.name.to_string(),
            name,
            idempotent: annotations
                .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)),
        };
        drop(catalog);
        let attempt = Attempt::new(upstream, params, progress);
        // A cancelled call is dropped, and with it the upstream request.
        tokio::select! {
            result = self.gate.call(caller, call, attempt) => result.map(CallToolResponse::Complete),
            () = context.ct.cancelled() => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "cancelled by the client",
                None,
            )),
        }
    }
}
