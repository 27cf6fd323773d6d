//! The gateway's MCP server ([`Front`]): the hub's tools, resources and
//! prompts as one server, each message's caller and what it may see
//! asked of the [`Gate`], and every `tools/call` run by the gate.
//! `resources/read` and `prompts/get` go to the server that offers them
//! as they are, run by the gate too ([`Gate::read`]); a server the
//! caller may not see is neither listed nor read. A request the client
//! cancels is dropped here, which cancels it upstream (the SDK sends
//! `notifications/cancelled`); progress the upstream reports goes back
//! to the client under its own token ([`crate::relay`]).
//!
//! A session (one per `initialize`) hears of the changes of the servers it
//! may see: their `notifications/*/list_changed`, and the updates of the
//! resources it subscribed to ([`crate::listeners`]); `resources/subscribe`
//! and `resources/unsubscribe` go to the server of the URI.

use std::sync::Arc;

use http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, ErrorCode, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressToken, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    RequestMetaObject, ServerCapabilities, ServerConfig, ServerResult, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};

use crate::Hub;
use crate::gate::{Attempt, Gate, Pass, Read, ReadKind, ToolCall};

/// The JSON-RPC error code of a call a policy refuses (the server's own
/// range, -32000 to -32099).
pub const POLICY_DENIED: ErrorCode = ErrorCode(-32003);

/// The JSON-RPC error code of a call refused for its rate (Sluice's own
/// limits, or the server's HTTP 429); its data carries `status` and
/// `retry_after_ms`.
pub const RATE_LIMITED: ErrorCode = ErrorCode(-32029);

/// How long the server of a URI may take to answer `resources/subscribe`
/// or `resources/unsubscribe`.
const SUBSCRIBE_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// See the module doc.
#[derive(Debug)]
pub struct Front<G> {
    hub: Arc<Hub>,
    gate: Arc<G>,
    /// The session this front serves (each session's front is its own).
    session: u64,
}

impl<G> Clone for Front<G> {
    fn clone(&self) -> Self {
        Front {
            hub: Arc::clone(&self.hub),
            gate: Arc::clone(&self.gate),
            session: self.session,
        }
    }
}

impl<G: Gate> Front<G> {
    /// The front of `hub`, every call through `gate`.
    pub fn new(hub: Arc<Hub>, gate: Arc<G>) -> Self {
        let session = hub.listeners().session();
        Front { hub, gate, session }
    }

    /// The same front for a new session.
    pub fn for_session(&self) -> Self {
        Front {
            session: self.hub.listeners().session(),
            ..self.clone()
        }
    }

    /// The server whose resource `uri` is, once the caller may see it.
    async fn server_of(
        &self,
        caller: &G::Caller,
        uri: &str,
    ) -> Result<(usize, Arc<crate::Upstream>), ErrorData> {
        let Some((server, _)) = self.hub.resources().await.route(uri) else {
            return Err(unknown_resource(uri));
        };
        let upstream = Arc::clone(&self.hub.servers()[server]);
        self.gate
            .allows(caller, upstream.name(), None)
            .map_err(|policy| ErrorData::new(POLICY_DENIED, policy, None))?;
        Ok((server, upstream))
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<G::Caller, ErrorData> {
        self.gate.caller(context.extensions.get::<Parts>())
    }

    /// For each server name of `servers`, whether the caller may see that
    /// server's resources and prompts (asked once per server).
    fn seen<'a>(
        &self,
        caller: &G::Caller,
        servers: impl Iterator<Item = &'a Arc<str>>,
    ) -> Vec<bool> {
        let mut asked: Vec<(&str, bool)> = Vec::new();
        servers
            .map(|s| {
                if let Some((_, seen)) = asked.iter().find(|(n, _)| *n == &**s) {
                    return *seen;
                }
                let seen = self.gate.allows(caller, s, None).is_ok();
                asked.push((s, seen));
                seen
            })
            .collect()
    }

    /// `request` (reading `target`) sent to server `server` as it is,
    /// once the gate allows the caller to see that server, through the
    /// gate's [`Gate::read`]; cancelled with the client's request.
    async fn pass(
        &self,
        caller: G::Caller,
        context: &RequestContext<RoleServer>,
        server: usize,
        (kind, target): (ReadKind, String),
        meta: Option<&RequestMetaObject>,
        request: ClientRequest,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = Arc::clone(&self.hub.servers()[server]);
        self.gate
            .allows(&caller, upstream.name(), None)
            .map_err(|policy| ErrorData::new(POLICY_DENIED, policy, None))?;
        let progress = progress_of(context, meta).map(|t| (context.peer.clone(), t));
        let read = Read {
            server: upstream.name().into(),
            kind,
            target,
            call_id: context.id.to_string(),
        };
        let pass = Pass::new(upstream, request, progress);
        tokio::select! {
            r = self.gate.read(caller, read, pass) => r,
            () = context.ct.cancelled() => Err(cancelled()),
        }
    }
}

/// The client's progress token: progress the server reports comes back
/// under it (the SDK sends a token of its own upstream).
fn progress_of(
    context: &RequestContext<RoleServer>,
    params: Option<&RequestMetaObject>,
) -> Option<ProgressToken> {
    (context.meta.get_progress_token()).or_else(|| params.and_then(|m| m.get_progress_token()))
}

/// The error of a URI no server offers.
fn unknown_resource(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!(
            "unknown resource {uri:?}: `resources/list` and `resources/templates/list` name the resources there are"
        ),
        None,
    )
}

/// The error of a request the client cancelled (it is not read: the
/// client gave up on it).
fn cancelled() -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None)
}

/// The error of an answer of the wrong kind to `method`.
fn unexpected(method: &str, answer: &ServerResult) -> ErrorData {
    ErrorData::internal_error(
        crate::upstream::unexpected(method, answer).to_string(),
        None,
    )
}

impl<G: Gate> rmcp::ServerHandler for Front<G> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("sluice", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of the MCP servers behind this Sluice gateway; every call is \
                 queued fairly and paced to the limit of the API it reaches.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Ok(caller) = self.gate.caller(context.extensions.get::<Parts>()) else {
            return;
        };
        let gate = Arc::clone(&self.gate);
        let sees = Box::new(move |server: &str| gate.allows(&caller, server, None).is_ok());
        (self.hub.listeners()).listen(self.session, context.peer, sees);
    }

    #[allow(deprecated)] // the 2026-07-28 protocol's `subscriptions/listen` is not offered
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context)?;
        let (server, upstream) = self.server_of(&caller, &request.uri).await?;
        let listeners = self.hub.listeners();
        let first = listeners
            .subscribe(self.session, server, &request.uri)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        if first {
            let uri = request.uri.clone();
            let asked =
                ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(request));
            if let Err(e) = upstream.request_listened(asked, SUBSCRIBE_FOR).await {
                listeners.unsubscribe(self.session, server, &uri);
                return Err(e.into_rpc(upstream.name()));
            }
        }
        Ok(())
    }

    #[allow(deprecated)] // as `subscribe`
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context)?;
        let (server, upstream) = self.server_of(&caller, &request.uri).await?;
        if self
            .hub
            .listeners()
            .unsubscribe(self.session, server, &request.uri)
        {
            let asked =
                ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(request));
            upstream
                .request_listened(asked, SUBSCRIBE_FOR)
                .await
                .map_err(|e| e.into_rpc(upstream.name()))?;
        }
        Ok(())
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
                    .allows(&caller, &e.server_name, Some(&e.item.name))
                    .is_ok()
            })
            .map(|e| e.listed())
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context)?;
        let all = self.hub.resources().await;
        let seen = self.seen(&caller, all.resources.iter().map(|(_, s, _)| s));
        let resources = (all.resources.iter().zip(seen))
            .filter(|(_, seen)| *seen)
            .map(|((_, _, r), _)| r.clone())
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let caller = self.caller(&context)?;
        let all = self.hub.resources().await;
        let seen = self.seen(&caller, all.templates.iter().map(|(_, s, _)| s));
        let templates = (all.templates.iter().zip(seen))
            .filter(|(_, seen)| *seen)
            .map(|((_, _, t), _)| t.clone())
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context)?;
        let Some((server, _)) = self.hub.resources().await.route(&request.uri) else {
            return Err(unknown_resource(&request.uri));
        };
        let meta = request.meta.clone();
        let uri = request.uri.clone();
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request));
        let read = (ReadKind::Resource, uri);
        match self
            .pass(caller, &context, server, read, meta.as_ref(), request)
            .await?
        {
            ServerResult::ReadResourceResult(r) => Ok(ReadResourceResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(ReadResourceResponse::InputRequired(r)),
            other => Err(unexpected("resources/read", &other)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let caller = self.caller(&context)?;
        let catalog = self.hub.prompts().await;
        let seen = self.seen(&caller, catalog.entries().iter().map(|e| &e.server_name));
        let prompts = (catalog.entries().iter().zip(seen))
            .filter(|(_, seen)| *seen)
            .map(|(e, _)| e.listed())
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = self.caller(&context)?;
        let catalog = self.hub.prompts().await;
        let Some(entry) = catalog.find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt {:?}: `prompts/list` names the prompts there are",
                    request.name
                ),
                None,
            ));
        };
        let server = entry.server;
        let mut params = request;
        params.name.clone_from(&entry.item.name);
        drop(catalog);
        let meta = params.meta.clone();
        let name = params.name.clone();
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        let read = (ReadKind::Prompt, name);
        match self
            .pass(caller, &context, server, read, meta.as_ref(), request)
            .await?
        {
            ServerResult::GetPromptResult(r) => Ok(GetPromptResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            other => Err(unexpected("prompts/get", &other)),
        }
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
            .allows(&caller, &entry.server_name, Some(&entry.item.name))
            .map_err(|policy| ErrorData::new(POLICY_DENIED, policy, None))?;
        let upstream = Arc::clone(&self.hub.servers()[entry.server]);
        let mut params = request;
        params.name = entry.item.name.clone();
        let progress =
            progress_of(&context, params.meta.as_ref()).map(|t| (context.peer.clone(), t));
        let annotations = entry.item.annotations.as_ref();
        let call = ToolCall {
            server: Arc::clone(&entry.server_name),
            tool: entry.item.name.to_string(),
            name,
            call_id: context.id.to_string(),
            idempotent: annotations
                .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)),
        };
        drop(catalog);
        let attempt = Attempt::new(upstream, params, progress);
        // A cancelled call is dropped, and with it the upstream request.
        tokio::select! {
            result = self.gate.call(caller, call, attempt) => result.map(CallToolResponse::Complete),
            () = context.ct.cancelled() => Err(cancelled()),
        }
    }
}
