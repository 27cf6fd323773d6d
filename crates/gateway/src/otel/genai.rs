//! The OpenTelemetry GenAI semantic conventions on a model call's span
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/>):
//! named `{gen_ai.operation.name} {gen_ai.request.model}`, kind CLIENT,
//! covering the call with all its retries.
//!
//! Both `gen_ai.provider.name` (the conventions since 1.37) and
//! `gen_ai.system` (1.36 and before, which most backends still read) are
//! set, to the same value.

use serde::Deserialize;
use serde_json::Value;
use sluice_otel::Span;
use sluice_usage::{AnswerHead, Endpoint, Usage};

/// A candidate model's call, as its span describes it.
#[derive(Debug)]
pub(crate) struct ModelCall<'a> {
    /// The route's operation.
    pub endpoint: Endpoint,
    /// The configured provider (`openai`, `google`, …).
    pub provider: &'a str,
    /// The model as the gateway names it (`openai/gpt-4o-mini`).
    pub model: &'a str,
    /// The model as its provider knows it (`gpt-4o-mini`).
    pub upstream_model: &'a str,
    /// Where the call goes.
    pub url: &'a reqwest::Url,
    /// The client's request body.
    pub body: &'a Value,
    /// Whether the answer is streamed.
    pub stream: bool,
}

impl ModelCall<'_> {
    /// `chat gpt-4o-mini`.
    pub(crate) fn span_name(&self) -> String {
        format!("{} {}", operation(self.endpoint), self.upstream_model)
    }

    /// The request's attributes.
    pub(crate) fn describe(&self, span: &mut Span) {
        let provider = provider_name(self.provider);
        span.set("gen_ai.operation.name", operation(self.endpoint))
            .set("gen_ai.provider.name", provider.clone())
            .set("gen_ai.system", provider)
            .set("gen_ai.request.model", self.upstream_model.to_owned())
            .set("sluice.model", self.model.to_owned())
            .set("sluice.stream", self.stream);
        if let Some(host) = self.url.host_str() {
            span.set("server.address", host.to_owned());
        }
        if let Some(port) = self.url.port_or_known_default() {
            span.set("server.port", port);
        }
        let body = self.body;
        let max_tokens = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|k| body.get(k).and_then(Value::as_u64));
        if let Some(n) = max_tokens {
            span.set("gen_ai.request.max_tokens", n);
        }
        for (field, key) in [
            ("temperature", "gen_ai.request.temperature"),
            ("top_p", "gen_ai.request.top_p"),
            ("frequency_penalty", "gen_ai.request.frequency_penalty"),
            ("presence_penalty", "gen_ai.request.presence_penalty"),
        ] {
            if let Some(x) = body.get(field).and_then(Value::as_f64) {
                span.set(key, x);
            }
        }
        if let Some(seed) = body.get("seed").and_then(Value::as_i64) {
            span.set("gen_ai.request.seed", seed);
        }
        if let Some(n) = body.get("n").and_then(Value::as_u64).filter(|n| *n != 1) {
            span.set("gen_ai.request.choice.count", n);
        }
    }
}

/// `chat` or `embeddings`.
fn operation(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Embeddings => "embeddings",
        Endpoint::Completions => "text_completion",
        Endpoint::Images => "generate_content",
        // Not among the conventions' operations: named as OpenAI does.
        Endpoint::Transcriptions => "transcription",
        Endpoint::Moderations => "moderation",
        Endpoint::Chat | Endpoint::Responses | Endpoint::Messages | Endpoint::Generate => "chat",
    }
}

/// The conventions' name of a configured provider: the well-known ones
/// mapped, any other by its own name.
fn provider_name(provider: &str) -> String {
    match provider {
        "google" | "gemini" => "gcp.gemini",
        "mistral" => "mistral_ai",
        "xai" | "grok" => "x_ai",
        "bedrock" => "aws.bedrock",
        other => other,
    }
    .to_owned()
}

/// The parts of an answer the conventions describe, in the formats
/// clients get (OpenAI chat, embeddings and responses, Anthropic
/// messages); every other field is skipped unread.
#[derive(Debug, Deserialize)]
struct Head {
    model: Option<String>,
    id: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    finish_reason: Option<String>,
}

/// What a whole answer's `body` (in the client's format) says of
/// itself: its model, id and finish reasons; `None` when it is not JSON.
pub(crate) fn head_of(body: &[u8]) -> Option<AnswerHead> {
    let head = serde_json::from_slice::<Head>(body).ok()?;
    let mut finish_reasons: Vec<String> = head
        .choices
        .into_iter()
        .filter_map(|c| c.finish_reason)
        .collect();
    finish_reasons.extend(head.stop_reason);
    Some(AnswerHead {
        id: head.id,
        model: head.model,
        finish_reasons,
    })
}

/// The answer's attributes: usage, and the model, id and finish reasons
/// it told (a whole answer's or a stream's).
pub(super) fn answered(span: &mut Span, usage: Option<Usage>, head: Option<AnswerHead>) {
    if let Some(u) = usage {
        span.set("gen_ai.usage.input_tokens", u.prompt_tokens)
            .set("gen_ai.usage.output_tokens", u.completion_tokens);
    }
    let Some(head) = head else {
        return;
    };
    if let Some(m) = head.model {
        span.set("gen_ai.response.model", m);
    }
    if let Some(id) = head.id {
        span.set("gen_ai.response.id", id);
    }
    if !head.finish_reasons.is_empty() {
        span.set("gen_ai.response.finish_reasons", head.finish_reasons);
    }
}
