//! [`Gate`]: what the gateway does with each call: who is asking, what
//! they may see, and how one tool call (or one read of a server's
//! resource or prompt) goes through its limits. The front
//! ([`crate::front`]) asks the gate and never decides itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressToken, ServerResult,
};
use rmcp::service::{Peer, RoleServer};

use crate::error::UpstreamError;
use crate::upstream::Upstream;

/// One tool call, as the gate sees it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The server that offers the tool.
    pub server: Arc<str>,
    /// The tool's own name on that server.
    pub tool: String,
    /// The name the client called it by (see [`crate::catalog`]).
    pub name: String,
    /// The JSON-RPC id of the client's `tools/call`.
    pub call_id: String,
    /// Whether the tool says a call is safe to send again (its
    /// `readOnlyHint` or `idempotentHint`).
    pub idempotent: bool,
}

/// The call itself, sent upstream as often as the gate decides (once per
/// attempt), always with the same arguments.
#[derive(Debug, Clone)]
pub struct Attempt {
    upstream: Arc<Upstream>,
    params: CallToolRequestParams,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
}

impl Attempt {
    pub(crate) fn new(
        upstream: Arc<Upstream>,
        params: CallToolRequestParams,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Self {
        Attempt {
            upstream,
            params,
            progress,
        }
    }

    /// Sends the call, waiting at most `timeout` for its result.
    ///
    /// # Errors
    /// See [`UpstreamError`]. A result the tool marks as an error is a
    /// result, not an error here ([`crate::rate_limit_of`] reads it).
    pub async fn send(&self, timeout: Duration) -> Result<CallToolResult, UpstreamError> {
        self.upstream
            .call(self.params.clone(), timeout, self.progress.clone())
            .await
    }
}

/// What a [`Read`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// `resources/read`: its target is the resource's URI.
    Resource,
    /// `prompts/get`: its target is the prompt's own name on its server.
    Prompt,
}

impl ReadKind {
    /// `resource` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadKind::Resource => "resource",
            ReadKind::Prompt => "prompt",
        }
    }
}

/// One read of a server's own content (`resources/read`, `prompts/get`),
/// as the gate sees it: not a call of the API behind the server.
#[derive(Debug, Clone)]
pub struct Read {
    /// The server read from.
    pub server: Arc<str>,
    /// What is read.
    pub kind: ReadKind,
    /// The resource's URI, or the prompt's name on its server.
    pub target: String,
    /// The JSON-RPC id of the client's request.
    pub call_id: String,
}

/// The read itself, sent once, as the client asked it.
#[derive(Debug)]
pub struct Pass {
    upstream: Arc<Upstream>,
    request: ClientRequest,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
}

impl Pass {
    pub(crate) fn new(
        upstream: Arc<Upstream>,
        request: ClientRequest,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Self {
        Pass {
            upstream,
            request,
            progress,
        }
    }

    /// Sends the request, waiting at most `timeout` for the server's
    /// answer (which the front checks is of the right kind).
    ///
    /// # Errors
    /// See [`UpstreamError`].
    pub async fn send(self, timeout: Duration) -> Result<ServerResult, UpstreamError> {
        (self.upstream)
            .request(self.request, timeout, self.progress)
            .await
    }
}

/// See the module doc.
pub trait Gate: Send + Sync + 'static {
    /// Who is asking.
    type Caller: Send + Sync + 'static;

    /// The caller of an MCP message that came in the HTTP request of
    /// `parts` (`None` for a transport without one).
    ///
    /// # Errors
    /// The JSON-RPC error the client gets (not authenticated, draining).
    fn caller(&self, parts: Option<&Parts>) -> Result<Self::Caller, ErrorData>;

    /// Whether `caller` may see and use `tool` of `server` (`None`: any of
    /// the server's tools, for its resources and prompts).
    ///
    /// # Errors
    /// The policy that hides it, as the client is told.
    fn allows(&self, caller: &Self::Caller, server: &str, tool: Option<&str>)
    -> Result<(), String>;

    /// Runs `read` for `caller`: the gate's admission, limits and records
    /// around one [`Pass::send`] (a read of the server's own content, not
    /// a call of the API behind it).
    fn read(
        &self,
        caller: Self::Caller,
        read: Read,
        pass: Pass,
    ) -> impl Future<Output = Result<ServerResult, ErrorData>> + Send;

    /// Runs `call` for `caller`: the gate's admission, limits and records
    /// around one or more [`Attempt::send`]s.
    fn call(
        &self,
        caller: Self::Caller,
        call: ToolCall,
        attempt: Attempt,
    ) -> impl Future<Output = Result<CallToolResult, ErrorData>> + Send;
}
