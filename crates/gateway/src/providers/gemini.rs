//! Google Gemini's native API: `models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, with `usageMetadata`. It answers
//! `/v1/chat/completions` by translation (`gemini/chat.rs`); a provider
//! with `format = "gemini"` uses it, one with `format = "openai"` (the
//! default for `google`) uses Google's OpenAI-compatible endpoint instead.

pub(super) mod chat;
pub(super) mod events;

use axum::http::{HeaderName, StatusCode};
use bytes::Bytes;
use serde_json::Value;
use sluice_usage::{Endpoint, Estimate, WireFormat};

use super::translate::{self, Translated};
use super::{
    Answer, BadField, Call, Exchange, Outbound, Provider, RequestError, StreamReader, json_headers,
    secret, to_bytes,
};

/// The Gemini adapter.
#[derive(Debug)]
pub(crate) struct Gemini;

/// The model goes in the URL path as one segment: only characters that
/// need no escaping, no `/`, and not `.` or `..` (which a URL reads as a
/// step up or nowhere).
fn check_model(model: &str) -> Result<(), BadField> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if model.is_empty() || !model.chars().all(plain) || model == "." || model == ".." {
        return Err(BadField::new(
            "model",
            format!(
                "{model:?} cannot be one segment of a Gemini URL: use letters, digits, '-', '_', \
                 '.' after the provider's prefix"
            ),
        ));
    }
    Ok(())
}

impl Provider for Gemini {
    fn format(&self) -> WireFormat {
        WireFormat::Gemini
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::Chat
    }

    fn route(&self) -> &'static str {
        "/v1/chat/completions"
    }

    fn estimate(
        &self,
        endpoint: Endpoint,
        body: &Value,
        chars_per_token: u64,
        default_max_tokens: u64,
    ) -> Estimate {
        // The client's body is an OpenAI chat request.
        WireFormat::Openai
            .dialect()
            .estimate(endpoint, body, chars_per_token, default_max_tokens)
    }

    fn check_model(&self, model: &str) -> Result<(), BadField> {
        check_model(model)
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        check_model(call.model)?;
        let chat = translate::parse(call.body, chat::ACCEPTS)?;
        let body = chat::request(&chat, call.default_max_tokens)?;
        let (method, query) = if call.stream {
            ("streamGenerateContent", Some("alt=sse"))
        } else {
            ("generateContent", None)
        };
        let segment = format!("{}:{method}", call.model);
        let mut headers = json_headers(call.stream);
        if let Some(key) = call.key {
            secret(&mut headers, HeaderName::from_static("x-goog-api-key"), key)?;
        }
        Ok(Outbound {
            url: super::url(base_url, &["models", &segment], query)?,
            headers,
            body: to_bytes(&body),
            exchange: Exchange {
                endpoint: call.endpoint,
                client_wants_usage: chat.include_usage,
                model: call.model.to_owned(),
            },
        })
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        chat::answer(status, &body, &exchange.model)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        Box::new(Translated::new(
            WireFormat::Gemini,
            events::Events::default(),
            exchange.client_wants_usage,
            &exchange.model,
        ))
    }
}
