//! Anthropic's dialect: `/messages`. Cache writes and reads are reported
//! apart from `input_tokens` and count as input; a stream carries its
//! usage in `message_start` and `message_delta`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Dialect, facts, usage_alone, usage_details};
use crate::estimate::field;
use crate::stream::{Tally, failure};
use crate::wire::{AnthropicBody, AnthropicEvent, CacheTokens};
use crate::{BodyFacts, Details, Endpoint, WireFormat};

/// The Anthropic dialect.
#[derive(Debug)]
pub(crate) struct Anthropic;

/// Anthropic's cache writes and reads are input apart from its
/// `input_tokens`.
const CACHE: CacheTokens = CacheTokens::Apart;

impl Dialect for Anthropic {
    fn format(&self) -> WireFormat {
        WireFormat::Anthropic
    }

    fn chat_limit(&self, body: &Value, default: u64) -> u64 {
        field(body, "max_tokens").unwrap_or(default)
    }

    fn read_body(&self, endpoint: Endpoint, body: &[u8]) -> BodyFacts {
        serde_json::from_slice::<AnthropicBody>(body)
            .map(|b| facts(CACHE, endpoint, b.usage.as_ref(), b.count()))
            .unwrap_or_else(|_| usage_alone(CACHE, endpoint, body))
    }

    fn details(&self, body: &[u8]) -> Details {
        usage_details(CACHE, body)
    }

    fn has_usage_chunk(&self, _: Endpoint) -> bool {
        false
    }

    fn scan_event(&self, _: Endpoint, tally: &mut Tally, data: &[u8]) -> bool {
        let Ok(event) = serde_json::from_slice::<AnthropicEvent>(data) else {
            return false;
        };
        // `message_start` carries the input (and a first output count),
        // `message_delta` the cumulative output and, lately, input too.
        if let Some(m) = event.message {
            tally.head.learn(m.id, m.model, None);
            if let Some(usage) = m.usage {
                tally.merge(&usage, CACHE);
            }
        }
        if let Some(usage) = &event.usage {
            tally.merge(usage, CACHE);
        }
        if let Some(delta) = event.delta {
            tally.add_chars(delta.chars());
            tally.head.learn(None, None, delta.stop_reason);
        }
        let tool_use = event.content_block.and_then(|b| b.kind);
        if event.kind.as_deref() == Some("content_block_start")
            && tool_use.as_deref() == Some("tool_use")
        {
            tally.add_tool_calls(1);
        }
        false
    }

    fn error_event(&self, _: Endpoint, _code: &str, message: &str) -> Bytes {
        failure::sse_error(
            true,
            &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
        )
    }
}
