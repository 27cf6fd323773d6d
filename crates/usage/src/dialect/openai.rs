//! OpenAI's dialect: `/chat/completions`, `/embeddings`, `/responses`
//! (also the OpenAI-compatible APIs of Google, DeepSeek and others).
//! Cached input is a breakdown inside `prompt_tokens`; a chat stream's
//! usage comes in a last usage-only chunk, when asked for.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Dialect, facts, usage_alone, usage_details};
use crate::bounds::MAX_CHOICES;
use crate::estimate::field;
use crate::stream::{Tally, chat, failure};
use crate::wire::{self, CacheTokens, ChatChunk, OpenaiBody, ResponsesEvent};
use crate::{BodyFacts, Details, Endpoint, WireFormat, answer};

/// OpenAI's cached input is a breakdown inside its prompt tokens.
const CACHE: CacheTokens = CacheTokens::Inside;

/// The OpenAI dialect.
#[derive(Debug)]
pub(crate) struct Openai;

impl Dialect for Openai {
    fn format(&self) -> WireFormat {
        WireFormat::Openai
    }

    fn chat_limit(&self, body: &Value, default: u64) -> u64 {
        // Every one of `n` choices may run to the limit.
        let choices = field(body, "n").unwrap_or(1).clamp(1, MAX_CHOICES);
        field(body, "max_completion_tokens")
            .or_else(|| field(body, "max_tokens"))
            .unwrap_or(default)
            .saturating_mul(choices)
    }

    fn read_body(&self, endpoint: Endpoint, body: &[u8]) -> BodyFacts {
        // The cursor first, the typed parse where it cannot be sure.
        match answer::openai(body) {
            Some((usage, calls)) => facts(CACHE, endpoint, usage.as_ref(), calls),
            None => typed(endpoint, body),
        }
    }

    fn details(&self, body: &[u8]) -> Details {
        usage_details(CACHE, body)
    }

    fn has_usage_chunk(&self, endpoint: Endpoint) -> bool {
        matches!(endpoint, Endpoint::Chat | Endpoint::Completions)
    }

    fn scan_event(&self, endpoint: Endpoint, tally: &mut Tally, data: &[u8]) -> bool {
        if endpoint == Endpoint::Responses {
            responses(tally, data);
            return false;
        }
        chat_event(tally, data)
    }

    fn error_event(&self, endpoint: Endpoint, code: &str, message: &str) -> Bytes {
        match endpoint {
            // A client of `/messages` reads Anthropic's shape.
            Endpoint::Messages => super::Anthropic.error_event(endpoint, code, message),
            // A Gemini client reads Gemini's.
            Endpoint::Generate => super::Gemini.error_event(endpoint, code, message),
            Endpoint::Responses => failure::sse_error(
                true,
                &json!({"type": "error", "code": code, "message": message, "param": null}),
            ),
            Endpoint::Chat
            | Endpoint::Embeddings
            | Endpoint::Completions
            | Endpoint::Transcriptions
            | Endpoint::Images
            | Endpoint::Moderations => failure::sse_error(
                false,
                &json!({"error": {"message": message, "type": "server_error", "code": code, "param": null}}),
            ),
        }
    }
}

/// A body's facts by the typed parse: the reference the cursor
/// (`answer.rs`) reads the same as.
pub(crate) fn typed(endpoint: Endpoint, body: &[u8]) -> BodyFacts {
    serde_json::from_slice::<OpenaiBody>(body)
        .map(|b| facts(CACHE, endpoint, b.usage.as_ref(), b.count()))
        .unwrap_or_else(|_| usage_alone(CACHE, endpoint, body))
}

/// One chat chunk: the cursor first, the typed parse where it cannot be
/// sure. Returns whether it is the usage-only chunk.
fn chat_event(tally: &mut Tally, data: &[u8]) -> bool {
    if let Some(facts) = chat::read(data) {
        return chat_facts(tally, facts);
    }
    let Ok(mut chunk) = serde_json::from_slice::<ChatChunk>(data) else {
        return false;
    };
    tally.head.learn(chunk.id.take(), chunk.model.take(), None);
    for choice in chunk.choices.iter_mut().flatten() {
        tally.head.learn(None, None, choice.finish_reason.take());
    }
    let deltas = || {
        chunk
            .choices
            .iter()
            .flatten()
            .filter_map(|c| c.delta.as_ref())
    };
    let chars = deltas()
        .map(wire::ChunkDelta::chars)
        .fold(0, u64::saturating_add);
    tally.add_chars(chars);
    let started = deltas()
        .flat_map(|d| d.tool_calls.iter().flatten())
        .filter(|call| call.id.is_some())
        .count();
    tally.add_tool_calls(started);
    let Some(usage) = chunk.usage else {
        return false;
    };
    tally.merge(&usage, CACHE);
    chunk.choices.is_some_and(|c| c.is_empty())
}

/// [`chat_event`] from what the cursor read: the same steps.
fn chat_facts(tally: &mut Tally, facts: chat::ChunkFacts<'_>) -> bool {
    let unknown = |have: &Option<String>, new: Option<&str>| {
        new.filter(|_| have.is_none()).map(str::to_owned)
    };
    let id = unknown(&tally.head.id, facts.id);
    let model = unknown(&tally.head.model, facts.model);
    tally.head.learn(id, model, None);
    for reason in facts.finish_reasons {
        tally.head.learn(None, None, Some(reason.to_owned()));
    }
    tally.add_chars(facts.chars);
    tally.add_tool_calls(facts.tool_calls);
    let Some(usage) = facts.usage else {
        return false;
    };
    tally.merge(&usage, CACHE);
    facts.no_choices
}

/// One `/responses` event.
fn responses(tally: &mut Tally, data: &[u8]) {
    let Ok(ResponsesEvent { response, delta }) = serde_json::from_slice::<ResponsesEvent>(data)
    else {
        return;
    };
    tally.add_chars(delta.0);
    let Some(response) = response else {
        return;
    };
    // Only the final response (completed, incomplete or failed) has
    // usage, and it lists every output item: count them there, once.
    if let Some(usage) = &response.usage {
        tally.merge(usage, CACHE);
        let calls = wire::count_typed(response.output.as_deref(), "function_call");
        tally.tool_calls = wire::saturate(calls);
    }
}
