//! Why an upstream call got no result.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::service::ServiceError;
use serde_json::json;

/// See the module doc.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The server cannot be reached (connecting, spawning or its
    /// `initialize` failed).
    #[error("{0}")]
    Unavailable(String),
    /// The server answered HTTP 429.
    #[error("the MCP server answered 429 Too Many Requests")]
    RateLimited {
        /// Its `Retry-After`, when it said.
        retry_after: Option<Duration>,
    },
    /// The server answered with a JSON-RPC error: the client's to see.
    #[error("{}", .0.message)]
    Protocol(ErrorData),
    /// The connection failed mid-call.
    #[error("the MCP server's connection failed: {0}")]
    Transport(String),
    /// The call's time ran out.
    #[error("the MCP server did not answer in time")]
    Timeout,
}

impl UpstreamError {
    /// The error of a failed request to a server.
    pub(crate) fn from_service(e: ServiceError) -> Self {
        match e {
            ServiceError::McpError(data) => UpstreamError::Protocol(data),
            ServiceError::Timeout { .. } => UpstreamError::Timeout,
            other => {
                let text = chain(&other);
                if text.contains("429") {
                    UpstreamError::RateLimited { retry_after: None }
                } else {
                    UpstreamError::Transport(text)
                }
            }
        }
    }

    /// The HTTP status the gateway records for it: 429 throttled, 503 not
    /// reached, 504 timed out, 502 failed, 400 the server's own JSON-RPC
    /// error.
    pub fn status(&self) -> u16 {
        match self {
            UpstreamError::Protocol(_) => 400,
            UpstreamError::RateLimited { .. } => 429,
            UpstreamError::Unavailable(_) => 503,
            UpstreamError::Timeout => 504,
            UpstreamError::Transport(_) => 502,
        }
    }

    /// The JSON-RPC error the client gets for it from `server`: the
    /// server's own error as it is; else an internal error naming the
    /// server, its status (and `retry_after_ms`) as data.
    pub fn into_rpc(self, server: &str) -> ErrorData {
        let status = self.status();
        match self {
            UpstreamError::Protocol(e) => e,
            UpstreamError::RateLimited { retry_after } => ErrorData::new(
                crate::RATE_LIMITED,
                format!("MCP server {server:?} answered 429 Too Many Requests"),
                Some(json!({
                    "status": status,
                    "retry_after_ms": retry_after.map(|d| d.as_millis() as u64),
                })),
            ),
            e => ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("MCP server {server:?}: {e}"),
                Some(json!({"status": status})),
            ),
        }
    }

    /// Whether sending the call again may succeed (for calls that are
    /// safe to repeat).
    pub fn is_transient(&self) -> bool {
        !matches!(self, UpstreamError::Protocol(_))
    }
}

/// `e` and its sources, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
