//! The parts of a call's usage that providers report beside the totals:
//! input read from their prompt cache and output spent on reasoning, for
//! the ledger (cached input has a price of its own).

use serde::Deserialize;

use crate::WireFormat;

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

#[derive(Deserialize)]
struct Body {
    usage: Option<Raw>,
    #[serde(rename = "usageMetadata")]
    usage_metadata: Option<Gemini>,
}

#[derive(Deserialize)]
struct Raw {
    prompt_tokens_details: Option<Prompt>,
    input_tokens_details: Option<Prompt>,
    completion_tokens_details: Option<Completion>,
    output_tokens_details: Option<Completion>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Prompt {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Completion {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Gemini {
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
}

/// The details in a whole (non-streamed) response body of `format`:
/// OpenAI's `prompt_tokens_details.cached_tokens` /
/// `input_tokens_details.cached_tokens` and
/// `completion_tokens_details.reasoning_tokens` /
/// `output_tokens_details.reasoning_tokens`, Anthropic's
/// `cache_read_input_tokens`, Gemini's `cachedContentTokenCount` and
/// `thoughtsTokenCount`. Zeros for a body that is not JSON.
pub fn details(format: WireFormat, body: &[u8]) -> Details {
    let Ok(b) = serde_json::from_slice::<Body>(body) else {
        return Details::default();
    };
    match format {
        WireFormat::Gemini => b.usage_metadata.map_or_else(Details::default, |g| Details {
            cached_tokens: g.cached_content_token_count.unwrap_or(0),
            reasoning_tokens: g.thoughts_token_count.unwrap_or(0),
        }),
        WireFormat::Anthropic => Details {
            cached_tokens: b.usage.and_then(|u| u.cache_read_input_tokens).unwrap_or(0),
            reasoning_tokens: 0,
        },
        WireFormat::Openai => b.usage.map_or_else(Details::default, |u| Details {
            cached_tokens: u
                .prompt_tokens_details
                .or(u.input_tokens_details)
                .and_then(|p| p.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .completion_tokens_details
                .or(u.output_tokens_details)
                .and_then(|c| c.reasoning_tokens)
                .unwrap_or(0),
        }),
    }
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
        assert_eq!(details(WireFormat::Openai, b"not json"), Details::default());
        assert_eq!(
            details(WireFormat::Openai, br#"{"usage": null}"#),
            Details::default()
        );
    }
}
