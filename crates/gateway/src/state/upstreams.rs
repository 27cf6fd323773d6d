//! [`Upstreams`]: how the gateway reaches providers and APIs — its HTTP
//! clients, which upstreams go through a proxy, and the credentials it
//! sends them.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{Routes, UpstreamClient};
use crate::config::Config;
use crate::credentials::UpstreamCredentials;
use crate::error::StartError;

/// The upstreams substate.
#[derive(Debug)]
pub(crate) struct Upstreams {
    /// The jobs' client (reqwest).
    pub(crate) client: reqwest::Client,
    /// Model and API calls' client (`client.rs`).
    pub(crate) upstream: UpstreamClient,
    /// Which upstreams go through a proxy, decided at start.
    pub(crate) routes: Routes,
    /// The credentials sent upstream, by API and provider, per tenant.
    pub(crate) credentials: UpstreamCredentials,
    /// The MCP servers behind `/mcp`, when `[[mcp_servers]]` names any.
    pub(crate) mcp: Option<Arc<crate::mcp::Mcp>>,
}

impl Upstreams {
    /// The clients and credentials `config` sets.
    ///
    /// # Errors
    /// [`StartError::MissingCredential`], [`StartError::Client`].
    pub(crate) fn build(config: &Config) -> Result<Arc<Upstreams>, StartError> {
        let credentials = UpstreamCredentials::from_config(config)?;
        // TLS to real providers; installing twice (tests) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            // Credentials (`authorization`, Anthropic's `x-api-key`) must
            // never follow a redirect to another host: redirects reach the
            // caller as they are.
            .redirect(reqwest::redirect::Policy::none())
            // HTTP/2 is built in for the OTLP exporter's gRPC; upstream
            // calls stay on HTTP/1.1, as before it.
            .http1_only()
            .build()
            .map_err(|e| StartError::Client(e.into()))?;
        let upstream = UpstreamClient::new(client.clone(), config.http.serving_threads())
            .map_err(|e| StartError::Client(e.into()))?;
        let routes = Routes::new(config, &upstream);
        let mcp = crate::mcp::Mcp::build(config)?;
        Ok(Arc::new(Upstreams {
            client,
            upstream,
            routes,
            credentials,
            mcp,
        }))
    }
}
