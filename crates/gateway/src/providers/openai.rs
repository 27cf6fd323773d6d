//! OpenAI's wire format: `/chat/completions`, `/embeddings`, `/responses`
//! (also Google's, DeepSeek's and others' OpenAI-compatible endpoints).

use axum::http::{StatusCode, header};
use bytes::Bytes;
use sluice_usage::{self as usage, Endpoint, WireFormat};

use super::{
    Answer, Call, Exchange, Outbound, Passthrough, Provider, RequestError, StreamReader,
    json_headers, pass_answer, secret, to_bytes, to_bytes_with_model, with_model,
};

/// The OpenAI adapter.
#[derive(Debug)]
pub(crate) struct Openai;

fn path(endpoint: Endpoint) -> &'static [&'static str] {
    match endpoint {
        Endpoint::Embeddings => &["embeddings"],
        Endpoint::Responses => &["responses"],
        // Not served (see `serves`); chat is the nearest.
        Endpoint::Chat | Endpoint::Messages => &["chat", "completions"],
    }
}

impl Provider for Openai {
    fn format(&self) -> WireFormat {
        WireFormat::Openai
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        matches!(
            endpoint,
            Endpoint::Chat | Endpoint::Embeddings | Endpoint::Responses
        )
    }

    fn route(&self) -> &'static str {
        "/v1/chat/completions"
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        // The usage of a chat stream comes in a last chunk only if asked
        // for: the gateway asks, and takes the chunk out again if the
        // client did not ask itself.
        let (body, client_wants_usage) = if call.stream && call.endpoint == Endpoint::Chat {
            let mut body = with_model(call.body, call.model);
            let asked = usage::request_usage_in_stream(&mut body);
            (to_bytes(&body), asked)
        } else {
            (to_bytes_with_model(call.body, call.model), true)
        };
        let mut headers = json_headers(call.stream);
        if let Some(key) = call.key {
            secret(
                &mut headers,
                header::AUTHORIZATION,
                &format!("Bearer {key}"),
            )?;
        }
        Ok(Outbound {
            url: super::url(base_url, path(call.endpoint), None)?,
            headers,
            body,
            exchange: Exchange {
                endpoint: call.endpoint,
                client_wants_usage,
                model: call.model.to_owned(),
            },
        })
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        pass_answer(WireFormat::Openai, exchange.endpoint, status, body)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        Box::new(Passthrough::new(WireFormat::Openai, exchange))
    }
}
