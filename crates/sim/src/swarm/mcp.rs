//! Tool calls over MCP, as agents now make them: an API target's call is
//! a `tools/call` of that API's tool (`gmail` → `GMAIL_SEND_EMAIL`) at
//! `{base}/mcp` — the sim's MCP server directly, or the gateway's `/mcp`
//! in front of it. One MCP session per base, tenant and priority (the
//! gateway reads both from the session's headers), opened on first use.
//!
//! The answer is read the way an agent reads it: a result is a success;
//! a result marked as an error carries the API's status (429 with
//! `retry_after_ms`) in its structured content; a JSON-RPC error carries
//! the gateway's status in its data (`-32029`, 429, `retry_after_ms`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::mcp::tool_for;

type Session = Arc<RunningService<RoleClient, ()>>;

/// Calls one session may have in flight (the agents of one tenant and
/// priority at most).
const MAX_IN_FLIGHT: usize = 1_024;

/// What one tool call got, as [`super::agent`] scores an HTTP answer.
pub(crate) struct ToolAnswer {
    /// 200 for a result; the API's or the gateway's status otherwise.
    pub status: StatusCode,
    /// The wait the answer asked for.
    pub retry_after: Option<Duration>,
}

/// The swarm's MCP sessions, opened on first use.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<(String, usize, &'static str), Session>>,
}

impl Sessions {
    /// Calls `api`'s tool at `base` for `tenant` at `priority`; `Err` when
    /// no answer came (the session could not open, the connection failed).
    pub(crate) async fn call(
        &self,
        base: &str,
        tenant: (usize, &str),
        priority: &'static str,
        api: &str,
    ) -> Result<ToolAnswer, ()> {
        let Some(tool) = tool_for(api) else {
            // The sim has no tool for this API: the agent's own mistake.
            return Ok(ToolAnswer {
                status: StatusCode::NOT_FOUND,
                retry_after: None,
            });
        };
        let session = self.session(base, tenant, priority).await?;
        let args: JsonObject = (tool.required.iter())
            .map(|p| ((*p).to_owned(), Value::String("swarm".into())))
            .collect();
        let call = CallToolRequestParams::new(tool.name).with_arguments(args);
        match session.call_tool(call).await {
            Ok(r) if r.is_error != Some(true) => Ok(ToolAnswer {
                status: StatusCode::OK,
                retry_after: None,
            }),
            Ok(r) => Ok(answer_of(r.structured_content.as_ref(), 502)),
            Err(ServiceError::McpError(e)) => Ok(answer_of(e.data.as_ref(), 500)),
            Err(_) => {
                // The session may be gone (the server restarted): the
                // next call opens another.
                self.open
                    .lock()
                    .await
                    .remove(&key(base, tenant.0, priority));
                Err(())
            }
        }
    }

    async fn session(
        &self,
        base: &str,
        (tenant, name): (usize, &str),
        priority: &'static str,
    ) -> Result<Session, ()> {
        let mut open = self.open.lock().await;
        if let Some(s) = open.get(&key(base, tenant, priority)) {
            return Ok(Arc::clone(s));
        }
        let headers = [
            ("x-sluice-workspace", name),
            ("x-sluice-priority", priority),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            Some((
                axum::http::HeaderName::from_static(k),
                axum::http::HeaderValue::from_str(v).ok()?,
            ))
        })
        .collect();
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp"))
            .custom_headers(headers)
            .max_concurrent_requests(MAX_IN_FLIGHT);
        let session: Session = Arc::new(
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .map_err(|_| ())?,
        );
        open.insert(key(base, tenant, priority), Arc::clone(&session));
        Ok(session)
    }
}

fn key(base: &str, tenant: usize, priority: &'static str) -> (String, usize, &'static str) {
    (base.to_owned(), tenant, priority)
}

/// The status and wait in `fields` (`status`, `retry_after_ms`), else
/// `otherwise`.
fn answer_of(fields: Option<&Value>, otherwise: u16) -> ToolAnswer {
    let status = fields
        .and_then(|v| v.get("status"))
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::from_u16(otherwise).unwrap_or(StatusCode::BAD_GATEWAY));
    let retry_after = fields
        .and_then(|v| v.get("retry_after_ms"))
        .and_then(Value::as_u64)
        .map(Duration::from_millis);
    ToolAnswer {
        status,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statuses_and_waits_are_read_from_the_answer() {
        let a = answer_of(Some(&json!({"status": 429, "retry_after_ms": 250})), 502);
        assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(a.retry_after, Some(Duration::from_millis(250)));
        let a = answer_of(Some(&json!({"status": 99999})), 502);
        assert_eq!(a.status, StatusCode::BAD_GATEWAY);
        assert_eq!(
            answer_of(None, 500).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
