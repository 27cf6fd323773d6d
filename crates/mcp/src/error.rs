//! Why an upstream call got no result.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::service::ServiceError;

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
