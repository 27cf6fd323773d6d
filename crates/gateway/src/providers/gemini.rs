//! Google Gemini's native API: `models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, with `usageMetadata`. It answers
//! Gemini clients (`/v1beta/models/{model}:generateContent`) as they
//! asked, and `/v1/chat/completions` by translation (`gemini/chat.rs`); a provider
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
        matches!(endpoint, Endpoint::Chat | Endpoint::Generate)
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
        // A translated call's body is an OpenAI chat request.
        let dialect = match endpoint {
            Endpoint::Generate => self.dialect(),
            _ => WireFormat::Openai.dialect(),
        };
        dialect.estimate(endpoint, body, chars_per_token, default_max_tokens)
    }

    fn check_model(&self, model: &str) -> Result<(), BadField> {
        check_model(model)
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        check_model(call.model)?;
        let (body, include_usage, array_stream) = if call.endpoint == Endpoint::Generate {
            let native = super::front::gemini_native(call.body, call.default_max_tokens);
            (native, true, super::front::gemini_array_stream(call.body))
        } else {
            let chat = translate::parse(call.body, chat::ACCEPTS)?;
            let body = chat::request(&chat, call.default_max_tokens)?;
            (body, chat.include_usage, false)
        };
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
                client_wants_usage: include_usage,
                model: call.model.to_owned(),
                array_stream,
            },
        })
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        if exchange.endpoint == Endpoint::Generate {
            return super::pass_answer(self.dialect(), exchange.endpoint, status, body);
        }
        chat::answer(status, &body, &exchange.model)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        if exchange.endpoint == Endpoint::Generate {
            let sse = Box::new(super::Passthrough::new(self.dialect(), exchange));
            return super::front::gemini_stream_form(sse, exchange.array_stream);
        }
        Box::new(Translated::new(
            WireFormat::Gemini,
            events::Events::default(),
            exchange.client_wants_usage,
            &exchange.model,
        ))
    }
}
