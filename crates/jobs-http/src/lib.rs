//! Job kinds that call HTTP APIs, for the workers of `sluice-jobs`:
//! `http` (a request to a configured API) and the seven Discord
//! operations, each with a typed payload that is checked when the job is
//! enqueued and again when it runs. They live beside the HTTP client so
//! that `sluice-jobs` itself knows nothing of HTTP.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde_json::json;
//! use sluice_jobs::worker::{Outcome, QueueConfig, WorkerPool, handler_fn};
//! use sluice_jobs::{JobStore, NewJob, SqliteStore, StoreConfig};
//! use sluice_jobs_http::{discord::DiscordConfig, http::HttpApis, validate_payload};
//! use sluice_limit::{Limit, Limiter, Rules};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let _ = rustls::crypto::ring::default_provider().install_default();
//! let store = Arc::new(SqliteStore::in_memory(StoreConfig::default()).await?);
//! let limiter = Limiter::new(Rules::new().exact("api:slack", Limit::per_second(3).burst(10)))?;
//!
//! // The gateway checks a payload before it stores the job.
//! let payload = json!({"guild_id": "81384788765712384", "name": "moderators"});
//! validate_payload("discord.create_role", &payload)?;
//!
//! // `http` and the seven `discord.*` kinds, plus one of our own.
//! let handlers = sluice_jobs_http::handlers(
//!     &limiter,
//!     HttpApis::seed(),
//!     DiscordConfig::default(),
//!     reqwest::Client::new(),
//! )?
//! .on("noop", handler_fn(|job| async move { Outcome::Completed(job.payload) }));
//!
//! let pool = WorkerPool::builder(Arc::clone(&store), limiter.clone())
//!     .handlers(handlers)
//!     .queue(QueueConfig::new("default"))
//!     .start()?;
//! store.enqueue(NewJob::new("default", "noop", json!({"n": 1}))).await?;
//! let report = pool.shutdown(Duration::from_secs(10)).await;
//! assert_eq!(report.released, 0);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod callback;
pub mod context;
mod credentials;
pub mod discord;
pub mod http;
pub mod metrics;
mod payload;
mod response;

pub use credentials::{Credentials, NoCredential, Secret};
pub use payload::PayloadError;

use serde_json::Value;
use sluice_jobs::worker::Handlers;
use sluice_limit::SharedLimiter;

/// The kind of a job that calls a configured HTTP API.
pub const HTTP_KIND: &str = "http";

/// Kinds this crate can run: `"http"` and the seven `"discord.*"` kinds.
pub const KINDS: &[&str] = &[
    HTTP_KIND,
    discord::CREATE_ROLE,
    discord::DELETE_ROLE,
    discord::ASSIGN_ROLE,
    discord::REMOVE_ROLE,
    discord::CREATE_CHANNEL,
    discord::DELETE_CHANNEL,
    discord::UPDATE_PERMISSIONS,
];

/// Checks a payload for `kind` at enqueue time.
///
/// ```
/// use serde_json::json;
/// use sluice_jobs_http::validate_payload;
///
/// let ok = json!({"guild_id": "81384788765712384", "name": "moderators"});
/// assert!(validate_payload("discord.create_role", &ok).is_ok());
///
/// let bad = json!({"guild_id": "not-a-snowflake", "name": "moderators"});
/// let err = validate_payload("discord.create_role", &bad).unwrap_err();
/// assert_eq!(err.field, "payload.guild_id");
///
/// assert_eq!(validate_payload("smtp", &ok).unwrap_err().field, "kind");
/// ```
///
/// # Errors
/// A [`PayloadError`] naming the JSON field (`payload.guild_id`,
/// `payload.path`, …), or `kind` for a kind this crate cannot run.
pub fn validate_payload(kind: &str, payload: &Value) -> Result<(), PayloadError> {
    if kind == HTTP_KIND {
        return http::HttpPayload::parse(payload).map(drop);
    }
    match discord::Operation::parse(kind, payload) {
        Some(parsed) => parsed.map(drop),
        None => Err(PayloadError::new(
            "kind",
            format!(
                "unknown kind {kind:?}; expected one of {}",
                KINDS.join(", ")
            ),
        )),
    }
}

/// Handlers for every kind in [`KINDS`]: `http` calls `http_apis`, the
/// `discord.*` kinds call Discord as `discord` says, all with `client`
/// and through `limiter` (the gateway's, so that jobs share each API's
/// bucket with interactive traffic): a `&`[`sluice_limit::Limiter`] or
/// any [`SharedLimiter`]. Add kinds of your own with [`Handlers::on`].
///
/// # Errors
/// [`sluice_limit::Error`] if Discord's global limit cannot be
/// configured on the limiter.
pub fn handlers(
    limiter: impl Into<SharedLimiter>,
    http_apis: http::HttpApis,
    discord: discord::DiscordConfig,
    client: reqwest::Client,
) -> Result<Handlers, sluice_limit::Error> {
    let limiter = limiter.into();
    let discord = discord::DiscordHandler::new(discord, client.clone(), limiter.clone())?;
    let mut handlers = Handlers::new().on(
        HTTP_KIND,
        http::HttpHandler::new(http_apis, client, limiter),
    );
    for kind in &KINDS[1..] {
        handlers = handlers.on(*kind, discord.clone());
    }
    Ok(handlers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_is_known_to_validation() {
        for kind in KINDS {
            let err = validate_payload(kind, &json!({"no_such_field": 1})).unwrap_err();
            assert_ne!(err.field, "kind", "{kind}: {err}");
        }
    }

    #[test]
    fn standard_handlers_cover_every_kind() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let limiter = sluice_limit::Limiter::new(sluice_limit::Rules::new()).unwrap();
        let handlers = handlers(
            &limiter,
            http::HttpApis::new(),
            discord::DiscordConfig::default(),
            reqwest::Client::new(),
        )
        .unwrap();
        let mut kinds = KINDS.to_vec();
        kinds.sort_unstable();
        assert_eq!(handlers.kinds(), kinds);
        assert!(
            limiter.contains("api:discord"),
            "the global bucket is configured"
        );
    }

    #[test]
    fn a_payload_that_is_not_an_object_names_the_payload() {
        let err = validate_payload("discord.delete_role", &json!([1])).unwrap_err();
        assert_eq!(err.field, "payload", "{err}");
        let err = validate_payload("http", &json!("GET /")).unwrap_err();
        assert_eq!(err.field, "payload", "{err}");
    }
}
