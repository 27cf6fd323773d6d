//! Anthropic's wire format: `/messages`, passed through for `/v1/messages`
//! and translated from and to OpenAI's chat format for
//! `/v1/chat/completions` (`anthropic/chat.rs`).

mod chat;

use axum::http::{HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use serde_json::Value;
use sluice_usage::{Endpoint, Estimate, WireFormat};

use super::translate::{self, Translated};
use super::{
    Answer, Call, Exchange, Outbound, Passthrough, Provider, RequestError, StreamReader,
    json_headers, pass_answer, secret, to_bytes, to_bytes_with_model,
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
        matches!(endpoint, Endpoint::Messages | Endpoint::Chat)
    }

    fn route(&self) -> &'static str {
        "/v1/messages (or /v1/chat/completions, translated)"
    }

    fn estimate(
        &self,
        endpoint: Endpoint,
        body: &Value,
        chars_per_token: u64,
        default_max_tokens: u64,
    ) -> Estimate {
        // A translated call is read as the OpenAI body it is, and may run
        // to the `max_tokens` sent for it.
        let (dialect, default) = match endpoint {
            Endpoint::Chat => (WireFormat::Openai.dialect(), chat::DEFAULT_MAX_TOKENS),
            _ => (self.dialect(), default_max_tokens),
        };
        dialect.estimate(endpoint, body, chars_per_token, default)
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        let translated = call.endpoint == Endpoint::Chat;
        let (body, client_wants_usage) = if translated {
            let chat = translate::parse(call.body, chat::ACCEPTS)?;
            (
                to_bytes(&chat::request(&chat, call.model)?),
                chat.include_usage,
            )
        } else {
            (to_bytes_with_model(call.body, call.model), true)
        };
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
            url: super::url(base_url, &["messages"], None)?,
            headers,
            body,
            exchange: Exchange {
                endpoint: call.endpoint,
                client_wants_usage,
                model: call.model.to_owned(),
                array_stream: false,
            },
        })
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        if exchange.endpoint == Endpoint::Chat {
            return chat::answer(status, &body, &exchange.model);
        }
        pass_answer(self.dialect(), exchange.endpoint, status, body)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        if exchange.endpoint == Endpoint::Chat {
            return Box::new(Translated::new(
                WireFormat::Anthropic,
                chat::Events::default(),
                exchange.client_wants_usage,
                &exchange.model,
            ));
        }
        Box::new(Passthrough::new(self.dialect(), exchange))
    }
}
