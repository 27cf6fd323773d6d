//! Google Gemini's native dialect: `generateContent` and
//! `streamGenerateContent`, whose usage is `usageMetadata` (cumulative in
//! each streamed chunk) and whose tool calls are `functionCall` parts.

use bytes::Bytes;
use serde_json::{Value, json};

use super::Dialect;
use crate::bounds::MAX_CHOICES;
use crate::details::Body;
use crate::stream::{Tally, failure};
use crate::wire::{GeminiResponse, GeminiUsage};
use crate::{BodyFacts, Details, Endpoint, WireFormat};

/// The Gemini dialect.
#[derive(Debug)]
pub(crate) struct Gemini;

impl Dialect for Gemini {
    fn chat_limit(&self, body: &Value, default: u64) -> u64 {
        let config = |name: &str| {
            body.get("generationConfig")
                .and_then(|c| c.get(name))
                .and_then(Value::as_u64)
        };
        let candidates = config("candidateCount").unwrap_or(1).clamp(1, MAX_CHOICES);
        config("maxOutputTokens")
            .unwrap_or(default)
            .saturating_mul(candidates)
    }

    fn read_body(&self, _: Endpoint, body: &[u8]) -> BodyFacts {
        serde_json::from_slice::<GeminiResponse>(body)
            .map(|b| {
                let usage = b.usage_metadata.as_ref();
                BodyFacts {
                    usage: usage.and_then(GeminiUsage::to_usage),
                    tool_calls: b.function_calls(),
                    details: usage.map_or_else(Details::default, details),
                }
            })
            .unwrap_or_default()
    }

    fn details(&self, body: &[u8]) -> Details {
        Body::parse(body)
            .and_then(|b| b.usage_metadata)
            .map_or_else(Details::default, |g| details(&g))
    }

    fn has_usage_chunk(&self, _: Endpoint) -> bool {
        false
    }

    fn scan_event(&self, _: Endpoint, tally: &mut Tally, data: &[u8]) -> bool {
        let Ok(chunk) = serde_json::from_slice::<GeminiResponse>(data) else {
            return false;
        };
        // Each chunk's `usageMetadata` is cumulative; the last one is whole.
        if let Some(usage) = &chunk.usage_metadata {
            tally.prompt = usage.prompt().or(tally.prompt);
            tally.completion = usage.completion().or(tally.completion);
            tally.total = usage.total().or(tally.total);
            tally.cached = usage.cached().or(tally.cached);
            tally.reasoning = usage.reasoning().or(tally.reasoning);
        }
        let calls = chunk.function_calls();
        tally.tool_calls = tally.tool_calls.saturating_add(calls);
        tally.add_chars(chunk.chars());
        false
    }

    fn error_event(&self, _: Endpoint, code: &str, message: &str) -> Bytes {
        failure::sse_error(
            false,
            &json!({"error": {"code": 500, "message": message, "status": "INTERNAL", "details": [{"reason": code}]}}),
        )
    }

    fn format(&self) -> WireFormat {
        WireFormat::Gemini
    }
}

/// The cached input and thoughts in a `usageMetadata`.
fn details(usage: &GeminiUsage) -> Details {
    Details::of(usage.cached(), usage.reasoning())
}
