//! An MCP tool call's path ([`McpGate`], the `sluice_mcp::Gate` of
//! `/mcp`): the caller from its key, what it may see (the `mcp`
//! allow-lists of its tenant and key), then — like a `/proxy` call — the
//! admission queue in its API's lane, the API's limiter resource
//! (`api:{api}`, the one `/proxy/{api}` and the jobs take), the `api`
//! bulkhead, retries, the upstream's 429s fed to the limiter, the ledger's
//! `tool` record and the metrics.
//!
//! The tool's API is its server's `tools` entry, else the server's `api`,
//! else the prefix of its name (`GMAIL_` → gmail, `[[apis]]
//! tool_prefixes`). A tool of no API still queues (in the lane
//! `mcp:{server}`) and takes its key's and tenant's limits and a pool
//! slot. A read of a server's resource or prompt does the same, without
//! an API's limit ([`read`]).

mod call;
mod read;

use axum::http::request::Parts;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ErrorCode, ServerResult};
use serde_json::json;
use sluice_admit::Admission;
use sluice_mcp::{Attempt, Gate, Pass, Read, ToolCall};

use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::request::Context;
use crate::state::AppState;

/// See the module doc.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct McpGate;

/// Who sent an MCP message: the gateway it reached, its tenant and the
/// request's context (one per HTTP request: its own id and deadline).
#[derive(Debug)]
pub(crate) struct Asker {
    pub state: AppState,
    pub ctx: Context,
}

impl Gate for McpGate {
    type Caller = Asker;

    fn caller(&self, parts: Option<&Parts>) -> Result<Asker, ErrorData> {
        let missing =
            || ErrorData::internal_error("the request reached /mcp without its caller", None);
        let parts = parts.ok_or_else(missing)?;
        // Both put there by the route, after the key was checked.
        let state = parts
            .extensions
            .get::<AppState>()
            .cloned()
            .ok_or_else(missing)?;
        let tenant = parts.extensions.get::<Tenant>().ok_or_else(missing)?;
        state.grace.check_open().map_err(|e| rpc_error(&e))?;
        let ctx =
            Context::from_headers(&state, tenant, &parts.headers).map_err(|e| rpc_error(&e))?;
        Ok(Asker { state, ctx })
    }

    fn allows(&self, a: &Asker, server: &str, tool: Option<&str>) -> Result<(), String> {
        let seen = |list: &[String]| match tool {
            Some(t) => sluice_keys::glob::any(list, &format!("{server}.{t}")),
            None => list
                .iter()
                .any(|g| sluice_keys::glob::names_server(g, server)),
        };
        let name = tool.map_or_else(|| format!("{server}.*"), |t| format!("{server}.{t}"));
        let tenant = &a.ctx.workspace;
        if let Some(list) = (a.state.config.tenants.iter())
            .find(|t| &t.name == tenant)
            .and_then(|t| t.mcp.as_deref())
            && !seen(list)
        {
            return Err(format!(
                "tool {name:?} is not allowed for tenant {tenant:?} (its `[[tenants]] mcp` allow-list)"
            ));
        }
        if let Some(c) = &a.ctx.caller {
            let allowed = match tool {
                Some(t) => c.allows_tool(server, t),
                None => c.allows_server(server),
            };
            if !allowed {
                return Err(format!(
                    "tool {name:?} is not allowed for this API key (the `mcp` allow-list of the key or its tenant)"
                ));
            }
        }
        Ok(())
    }

    async fn read(&self, a: Asker, what: Read, pass: Pass) -> Result<ServerResult, ErrorData> {
        read::run(a, what, pass).await
    }

    async fn call(
        &self,
        a: Asker,
        call: ToolCall,
        attempt: Attempt,
    ) -> Result<CallToolResult, ErrorData> {
        call::run(a, call, attempt).await
    }
}

/// A slot in the admission queue, in `lane`: the same queue as model and
/// proxied calls.
async fn admit(
    state: &AppState,
    ctx: &Context,
    lane: &str,
) -> Result<sluice_admit::Permit<crate::response::Shared>, ApiError> {
    match state
        .admission
        .queue
        .admit(ctx.ticket().with_lane(lane))
        .await?
    {
        Admission::Run(p) => Ok(p),
        Admission::Joined(_) => Err(ApiError::Internal("an MCP request joined another".into())),
    }
}

/// The JSON-RPC error of a refusal: its message, and its HTTP status and
/// `Retry-After` (milliseconds) as data, so a client can tell a rate
/// limit from a bad call.
pub(crate) fn rpc_error(e: &ApiError) -> ErrorData {
    let status = e.status().as_u16();
    let code = match status {
        400 | 404 | 422 => ErrorCode::INVALID_PARAMS,
        401 | 403 => sluice_mcp::POLICY_DENIED,
        429 => sluice_mcp::RATE_LIMITED,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    let retry_after_ms = match e {
        ApiError::RateLimited { retry_after, .. } | ApiError::Unavailable { retry_after, .. } => {
            retry_after.map(|d| d.as_millis() as u64)
        }
        ApiError::BudgetExceeded { retry_after, .. } => Some(retry_after.as_millis() as u64),
        _ => None,
    };
    ErrorData::new(
        code,
        e.to_string(),
        Some(json!({"status": status, "retry_after_ms": retry_after_ms})),
    )
}
