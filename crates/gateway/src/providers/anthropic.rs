//! Anthropic's wire format: `/messages`.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use sluice_usage::{Endpoint, WireFormat};

use super::{
    Answer, Call, Exchange, Outbound, Passthrough, Provider, StreamReader, join, json_headers,
    pass_answer, secret, to_bytes, with_model,
};

/// The API version sent when the client names none.
const DEFAULT_VERSION: &str = "2023-06-01";

/// The Anthropic adapter.
#[derive(Debug)]
pub(crate) struct Anthropic;

impl Provider for Anthropic {
    fn format(&self) -> WireFormat {
        WireFormat::Anthropic
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::Messages
    }

    fn route(&self) -> &'static str {
        "/v1/messages"
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, String> {
        let body = with_model(call.body, call.model);
        let mut headers = json_headers(call.stream);
        if let Some(key) = call.key {
            secret(&mut headers, HeaderName::from_static("x-api-key"), key)?;
        }
        // The client's version and beta flags, else the version every
        // Anthropic API key accepts.
        let version = call
            .headers
            .get("anthropic-version")
            .filter(|v| v.to_str().is_ok())
            .cloned()
            .unwrap_or(HeaderValue::from_static(DEFAULT_VERSION));
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        if let Some(beta) = call.headers.get("anthropic-beta") {
            headers.insert(HeaderName::from_static("anthropic-beta"), beta.clone());
        }
        Ok(Outbound {
            url: join(base_url, "/messages"),
            headers,
            body: to_bytes(&body),
            exchange: Exchange {
                endpoint: call.endpoint,
                client_wants_usage: true,
            },
        })
    }

    fn answer(&self, exchange: &Exchange, _status: StatusCode, body: Bytes) -> Answer {
        pass_answer(WireFormat::Anthropic, exchange.endpoint, body)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        Box::new(Passthrough::new(WireFormat::Anthropic, exchange))
    }
}
