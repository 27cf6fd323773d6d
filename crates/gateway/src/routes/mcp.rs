//! `ANY /mcp`: the MCP servers of `[[mcp_servers]]` as one Streamable
//! HTTP MCP server (docs/mcp.md).
//!
//! The caller is checked by its key first, as on every tenant route; the
//! request then goes to the SDK's Streamable HTTP service with the
//! tenant and the gateway's state in its extensions, where each message's
//! handler finds them ([`crate::layers::mcp::McpGate`]). The service and
//! its sessions live in the gateway ([`crate::mcp::Mcp`]), made once.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use tower::Service;

use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::state::AppState;

/// The handler.
pub async fn mcp(State(state): State<AppState>, tenant: Tenant, req: Request) -> Response {
    let Some(mcp) = state.upstreams.mcp.clone() else {
        return ApiError::NotFound("no MCP servers are configured: add [[mcp_servers]]".into())
            .into_response();
    };
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(tenant);
    parts.extensions.insert(state);
    let mut service = mcp.service.clone();
    match service.call(Request::from_parts(parts, body)).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}
