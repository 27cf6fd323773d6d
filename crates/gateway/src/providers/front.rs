//! Client formats in front of providers of another format: an Anthropic
//! Messages client (`/v1/messages`) calling a model that speaks OpenAI's
//! chat or Gemini's `generateContent`, a Gemini client
//! (`/v1beta/models/{model}:generateContent`) one that speaks OpenAI's
//! chat or Anthropic's Messages.
//!
//! OpenAI chat is the pivot. A [`Front`] turns the client's request into
//! an OpenAI chat request and hands it to the provider's own adapter
//! (which speaks OpenAI chat, or translates it to its format as it does
//! for OpenAI clients); the adapter's OpenAI answer, whole or chunk by
//! chunk, is written back in the client's format. Usage is what the
//! provider reported (read by the inner adapter from the upstream's own
//! body or stream), written in the client's terms. Each client format's
//! half is one file: `front/anthropic.rs`, `front/gemini.rs`.

mod anthropic;
mod chat;
mod completions;
mod gemini;
mod responses;
mod rewrite;

pub(crate) use gemini::{
    array_stream as gemini_array_stream, carried as gemini_carried, native as gemini_native,
    stream_form as gemini_stream_form,
};

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::Value;
use sluice_usage::{Endpoint, Estimate, WireFormat};

use super::{Answer, BadField, Call, Exchange, Outbound, Provider, RequestError, StreamReader};
use rewrite::Rewritten;

/// A client format that a [`Front`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Gemini `generateContent`.
    Gemini,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// OpenAI's legacy completions (`/v1/completions`).
    Completions,
}

impl Client {
    /// The gateway endpoint clients of this format call.
    fn endpoint(self) -> Endpoint {
        match self {
            Client::Anthropic => Endpoint::Messages,
            Client::Gemini => Endpoint::Generate,
            Client::Responses => Endpoint::Responses,
            Client::Completions => Endpoint::Completions,
        }
    }
}

/// A client format in front of a provider's adapter that serves OpenAI
/// chat (see the module doc).
#[derive(Debug)]
pub(crate) struct Front {
    client: Client,
    inner: &'static dyn Provider,
}

static ANTHROPIC_TO_OPENAI: Front = Front {
    client: Client::Anthropic,
    inner: &super::openai::Openai,
};
static ANTHROPIC_TO_GEMINI: Front = Front {
    client: Client::Anthropic,
    inner: &super::gemini::Gemini,
};
static ANTHROPIC_TO_AZURE: Front = Front {
    client: Client::Anthropic,
    inner: &super::azure::Azure,
};

static GEMINI_TO_OPENAI: Front = Front {
    client: Client::Gemini,
    inner: &super::openai::Openai,
};
static GEMINI_TO_ANTHROPIC: Front = Front {
    client: Client::Gemini,
    inner: &super::anthropic::Anthropic,
};
static GEMINI_TO_AZURE: Front = Front {
    client: Client::Gemini,
    inner: &super::azure::Azure,
};

static RESPONSES_TO_ANTHROPIC: Front = Front {
    client: Client::Responses,
    inner: &super::anthropic::Anthropic,
};
static RESPONSES_TO_GEMINI: Front = Front {
    client: Client::Responses,
    inner: &super::gemini::Gemini,
};
static RESPONSES_TO_AZURE: Front = Front {
    client: Client::Responses,
    inner: &super::azure::Azure,
};

static COMPLETIONS_TO_ANTHROPIC: Front = Front {
    client: Client::Completions,
    inner: &super::anthropic::Anthropic,
};
static COMPLETIONS_TO_GEMINI: Front = Front {
    client: Client::Completions,
    inner: &super::gemini::Gemini,
};
static COMPLETIONS_TO_AZURE: Front = Front {
    client: Client::Completions,
    inner: &super::azure::Azure,
};

/// The front that serves `endpoint`'s clients from a provider of
/// `format`, if there is one.
pub(crate) fn for_endpoint(format: WireFormat, endpoint: Endpoint) -> Option<&'static Front> {
    match (endpoint, format) {
        (Endpoint::Messages, WireFormat::Openai) => Some(&ANTHROPIC_TO_OPENAI),
        (Endpoint::Messages, WireFormat::Gemini) => Some(&ANTHROPIC_TO_GEMINI),
        (Endpoint::Messages, WireFormat::Azure) => Some(&ANTHROPIC_TO_AZURE),
        (Endpoint::Generate, WireFormat::Openai) => Some(&GEMINI_TO_OPENAI),
        (Endpoint::Generate, WireFormat::Anthropic) => Some(&GEMINI_TO_ANTHROPIC),
        (Endpoint::Generate, WireFormat::Azure) => Some(&GEMINI_TO_AZURE),
        (Endpoint::Responses, WireFormat::Anthropic) => Some(&RESPONSES_TO_ANTHROPIC),
        (Endpoint::Responses, WireFormat::Gemini) => Some(&RESPONSES_TO_GEMINI),
        (Endpoint::Responses, WireFormat::Azure) => Some(&RESPONSES_TO_AZURE),
        (Endpoint::Completions, WireFormat::Anthropic) => Some(&COMPLETIONS_TO_ANTHROPIC),
        (Endpoint::Completions, WireFormat::Gemini) => Some(&COMPLETIONS_TO_GEMINI),
        (Endpoint::Completions, WireFormat::Azure) => Some(&COMPLETIONS_TO_AZURE),
        _ => None,
    }
}

/// The provider's name in refusals.
pub(crate) fn provider_name(format: WireFormat) -> &'static str {
    match format {
        WireFormat::Openai => "OpenAI",
        WireFormat::Anthropic => "Anthropic",
        WireFormat::Gemini => "Gemini",
        WireFormat::Azure => "Azure OpenAI",
    }
}

impl Provider for Front {
    fn format(&self) -> WireFormat {
        self.inner.format()
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == self.client.endpoint()
    }

    fn route(&self) -> &'static str {
        self.inner.route()
    }

    fn estimate(
        &self,
        endpoint: Endpoint,
        body: &Value,
        chars_per_token: u64,
        default_max_tokens: u64,
    ) -> Estimate {
        // The body is the client's, in the client's format.
        let dialect = match self.client {
            Client::Anthropic => WireFormat::Anthropic.dialect(),
            Client::Gemini => WireFormat::Gemini.dialect(),
            Client::Responses | Client::Completions => WireFormat::Openai.dialect(),
        };
        dialect.estimate(endpoint, body, chars_per_token, default_max_tokens)
    }

    fn check_model(&self, model: &str) -> Result<(), BadField> {
        self.inner.check_model(model)
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        let provider = provider_name(self.inner.format());
        let to = super::fields::Format::of(self.inner.format());
        let chat = match self.client {
            Client::Anthropic => anthropic::to_chat(call.body, call.model, provider, to)?,
            Client::Gemini => gemini::to_chat(call.body, call.model, provider, to)?,
            Client::Responses => responses::to_chat(call.body, call.model, provider)?,
            Client::Completions => completions::to_chat(call.body, call.model, provider)?,
        };
        let inner = Call {
            endpoint: Endpoint::Chat,
            body: &chat,
            ..*call
        };
        let mut out = self.inner.request(base_url, &inner)?;
        out.exchange.array_stream =
            self.client == Client::Gemini && gemini::array_stream(call.body);
        Ok(out)
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        let answer = self.inner.answer(exchange, status, body);
        match self.client {
            Client::Anthropic => anthropic::answer(answer, &exchange.model),
            Client::Gemini => gemini::answer(answer, &exchange.model),
            Client::Responses => responses::answer(answer, &exchange.model),
            Client::Completions => completions::answer(answer, &exchange.model),
        }
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        let inner = self.inner.stream(exchange);
        // Every client format's stream is the inner one rewritten, event by
        // event, by the format's writer (`rewrite.rs`).
        let model = &exchange.model;
        match self.client {
            Client::Anthropic => Box::new(Rewritten::new(inner, anthropic::Writer::new(model))),
            Client::Gemini => {
                let form = gemini::Form::new(exchange.array_stream);
                Box::new(Rewritten::new(inner, gemini::Writer::new(model, form)))
            }
            Client::Responses => Box::new(Rewritten::new(inner, responses::Writer::new(model))),
            Client::Completions => {
                let chunks = completions::Chunks::new(model, exchange.client_wants_usage);
                Box::new(Rewritten::new(inner, chunks))
            }
        }
    }

    fn rate_limits(
        &self,
        headers: &axum::http::HeaderMap,
        now: std::time::SystemTime,
    ) -> sluice_limit::headers::RateLimitHeaders {
        self.inner.rate_limits(headers, now)
    }
}
