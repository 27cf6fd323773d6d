//! What an upstream MCP server is, as the gateway's configuration
//! resolved it: its name and how to reach it (environment variables
//! already expanded: a [`ServerSpec`] holds values, never `${VAR}`s).

use std::time::Duration;

use http::{HeaderName, HeaderValue};

/// One upstream MCP server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Its name: the `{server}` of `{server}.{tool}` and of allow-lists.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// How long connecting (and the `initialize` handshake) may take.
    pub connect_timeout: Duration,
}

/// How an upstream MCP server is reached.
#[derive(Clone)]
pub enum Transport {
    /// Streamable HTTP at `url`, with `headers` on every request (its
    /// credentials).
    Http {
        /// The server's MCP endpoint (`http://…/mcp`).
        url: String,
        /// Sent on every request.
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// A child process speaking MCP on its stdin and stdout, spawned on
    /// first use and again after it exits.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it (over the gateway's environment).
        env: Vec<(String, String)>,
    },
}

/// Header values are credentials: never printed.
impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                )
                .finish(),
            Transport::Stdio { program, args, env } => f
                .debug_struct("Stdio")
                .field("program", program)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish(),
        }
    }
}
