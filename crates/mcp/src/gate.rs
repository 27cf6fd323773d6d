//! [`Gate`]: what the gateway does with each call: who is asking, what
//! they may see, and how one tool call goes through its limits. The
//! front ([`crate::front`]) asks the gate and never decides itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressToken};
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

    /// How long a request passed through as it is (`resources/read`,
    /// `prompts/get`: reads of the server's own content, not calls of the
    /// API behind it) may take for `caller`.
    fn pass_timeout(&self, caller: &Self::Caller) -> Duration;

    /// Runs `call` for `caller`: the gate's admission, limits and records
    /// around one or more [`Attempt::send`]s.
    fn call(
        &self,
        caller: Self::Caller,
        call: ToolCall,
        attempt: Attempt,
    ) -> impl Future<Output = Result<CallToolResult, ErrorData>> + Send;
}
