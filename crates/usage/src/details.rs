//! The parts of a call's usage that providers report beside the totals:
//! input read from their prompt cache and output spent on reasoning, for
//! the ledger (cached input has a price of its own).

use serde::Deserialize;

use crate::WireFormat;
use crate::wire::{GeminiUsage, RawUsage};

/// Cached input and reasoning output, as a provider reported them (0 when
/// it did not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Details {
    /// Input tokens read from the provider's prompt cache (part of the
    /// prompt).
    pub cached_tokens: u64,
    /// Output tokens spent on reasoning (part of the completion).
    pub reasoning_tokens: u64,
}

/// The usage objects of a whole body, in every format's name for it: each
/// dialect reads the one its format reports.
#[derive(Deserialize)]
pub(crate) struct Body {
    pub(crate) usage: Option<RawUsage>,
    #[serde(rename = "usageMetadata")]
    pub(crate) usage_metadata: Option<GeminiUsage>,
}

impl Body {
    /// `body`'s usage objects, or `None` when it is not JSON of that shape.
    pub(crate) fn parse(body: &[u8]) -> Option<Body> {
        serde_json::from_slice(body).ok()
    }
}

impl Details {
    /// From the parts reported (0 for those that were not).
    pub(crate) fn of(cached: Option<u64>, reasoning: Option<u64>) -> Details {
        Details {
            cached_tokens: cached.unwrap_or(0),
            reasoning_tokens: reasoning.unwrap_or(0),
        }
    }
}

/// The details in a whole (non-streamed) response body of `format`:
/// OpenAI's `prompt_tokens_details.cached_tokens` /
/// `input_tokens_details.cached_tokens` and
/// `completion_tokens_details.reasoning_tokens` /
/// `output_tokens_details.reasoning_tokens`, Anthropic's
/// `cache_read_input_tokens`, Gemini's `cachedContentTokenCount` and
/// `thoughtsTokenCount`. Zeros for a body that is not JSON. A stream's are
/// read by [`crate::StreamScanner::details`].
pub fn details(format: WireFormat, body: &[u8]) -> Details {
    format.dialect().details(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_names_its_details() {
        let chat = br#"{"usage": {"prompt_tokens": 2000, "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 256}}}"#;
        assert_eq!(
            details(WireFormat::Openai, chat),
            Details {
                cached_tokens: 1024,
                reasoning_tokens: 256
            }
        );
        let responses =
            br#"{"usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 5}}}"#;
        assert_eq!(
            details(WireFormat::Openai, responses),
            Details {
                cached_tokens: 4,
                reasoning_tokens: 5
            }
        );
        let anthropic = br#"{"usage": {"input_tokens": 5, "cache_read_input_tokens": 700, "output_tokens": 3}}"#;
        assert_eq!(details(WireFormat::Anthropic, anthropic).cached_tokens, 700);
        let gemini = br#"{"usageMetadata": {"promptTokenCount": 9, "cachedContentTokenCount": 100, "thoughtsTokenCount": 7}}"#;
        assert_eq!(
            details(WireFormat::Gemini, gemini),
            Details {
                cached_tokens: 100,
                reasoning_tokens: 7
            }
        );
        // The body's one pass (`read_body`) reads the same details.
        for (format, body) in [
            (WireFormat::Openai, &chat[..]),
            (WireFormat::Openai, &responses[..]),
            (WireFormat::Anthropic, &anthropic[..]),
            (WireFormat::Gemini, &gemini[..]),
            (WireFormat::Openai, br#"{"usage": {"prompt_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1}}, "choices": 5}"#),
        ] {
            let once = crate::read_body(format, crate::Endpoint::Chat, body).details;
            assert_eq!(once, details(format, body), "{format:?}");
        }
        assert_eq!(details(WireFormat::Openai, b"not json"), Details::default());
        assert_eq!(
            details(WireFormat::Openai, br#"{"usage": null}"#),
            Details::default()
        );
    }
}
