//! Bounds on the usage an upstream reports: one answer claiming 9×10¹⁵
//! tokens was billed $9.2 billion and charged the token buckets as much,
//! starving its tenant for good. A call cannot use more input than the
//! most a model takes in one call, nor more output than the request
//! allowed (`max_tokens`, `max_completion_tokens`, `max_output_tokens`,
//! times `n`; reasoning and thinking tokens count in those limits for
//! OpenAI and Anthropic), nor more of either than a configured ceiling;
//! cached input is part of the input, reasoning part of the output.
//! Figures above are clamped to the bound, and the caller flags them.
//!
//! ```
//! use serde_json::json;
//! use sluice_usage::{Details, Endpoint, Usage, UsageCeiling};
//!
//! let body = json!({"model": "m", "max_tokens": 100, "messages": []});
//! let ceiling = UsageCeiling::of_request(Endpoint::Chat, &body, 1_000_000);
//! let mut usage = Usage { prompt_tokens: 9_000_000_000_000_000, completion_tokens: 50, total_tokens: 0 };
//! let mut details = Details::default();
//! let clamped = ceiling.clamp(&mut usage, &mut details);
//! assert_eq!(clamped, Some("prompt_tokens"));
//! assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.total_tokens), (1_000_000, 50, 1_000_050));
//! ```

use serde_json::Value;

use crate::{Details, Endpoint, Usage};

/// The default ceiling on each of a call's input and output tokens: five
/// times the largest context window offered today (2 million tokens).
pub const MAX_CALL_TOKENS: u64 = 10_000_000;

/// The most one call could have used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageCeiling {
    /// Input tokens, cached ones included.
    pub prompt: u64,
    /// Output tokens, reasoning included.
    pub completion: u64,
}

impl UsageCeiling {
    /// The bound of a request to `endpoint` with `body` (the client's),
    /// under a configured `ceiling` for each of input and output.
    pub fn of_request(endpoint: Endpoint, body: &Value, ceiling: u64) -> UsageCeiling {
        let completion =
            requested_output(endpoint, body).map_or(ceiling, |asked| asked.min(ceiling));
        UsageCeiling {
            prompt: ceiling,
            completion,
        }
    }

    /// Clamps `usage` and `details` to the bound (total = prompt +
    /// completion again); the first field that was above it, if any.
    pub fn clamp(&self, usage: &mut Usage, details: &mut Details) -> Option<&'static str> {
        let mut first = None;
        let mut cap = |value: &mut u64, max: u64, name: &'static str| {
            if *value > max {
                *value = max;
                first.get_or_insert(name);
            }
        };
        cap(&mut usage.prompt_tokens, self.prompt, "prompt_tokens");
        cap(
            &mut usage.completion_tokens,
            self.completion,
            "completion_tokens",
        );
        cap(
            &mut details.cached_tokens,
            usage.prompt_tokens,
            "cached_tokens",
        );
        cap(
            &mut details.reasoning_tokens,
            usage.completion_tokens,
            "reasoning_tokens",
        );
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
        first
    }
}

/// The output the request allowed, when it said: its output limit times
/// its choices. (A Gemini client's `maxOutputTokens` is not read: whether
/// thinking counts in it is not documented the same for every model, and
/// a bound too low would bill less than the provider does.)
fn requested_output(endpoint: Endpoint, body: &Value) -> Option<u64> {
    let field = |name: &str| body.get(name).and_then(Value::as_u64);
    match endpoint {
        Endpoint::Completions => {
            let limit = field("max_tokens")?;
            Some(limit.saturating_mul(field("n").unwrap_or(1).max(1)))
        }
        Endpoint::Chat => {
            let limit = field("max_completion_tokens").or_else(|| field("max_tokens"))?;
            Some(limit.saturating_mul(field("n").unwrap_or(1).max(1)))
        }
        Endpoint::Responses => field("max_output_tokens"),
        Endpoint::Messages => field("max_tokens"),
        Endpoint::Embeddings
        | Endpoint::Generate
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn usage(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
        }
    }

    fn details(cached: u64, reasoning: u64) -> Details {
        Details {
            cached_tokens: cached,
            reasoning_tokens: reasoning,
        }
    }

    #[test]
    fn figures_within_the_bound_are_kept() {
        let c =
            UsageCeiling::of_request(Endpoint::Chat, &json!({"max_tokens": 100, "n": 2}), 1_000);
        assert_eq!(c.completion, 200);
        let (mut u, mut d) = (usage(1_000, 200), details(1_000, 200));
        assert_eq!(c.clamp(&mut u, &mut d), None);
        assert_eq!((u, d), (usage(1_000, 200), details(1_000, 200)));
    }

    #[test]
    fn each_figure_is_clamped_to_what_the_call_could_use() {
        let c = UsageCeiling::of_request(
            Endpoint::Messages,
            &json!({"max_tokens": 64}),
            MAX_CALL_TOKENS,
        );
        let (mut u, mut d) = (usage(5, u64::MAX / 2), details(9, u64::MAX));
        assert_eq!(c.clamp(&mut u, &mut d), Some("completion_tokens"));
        assert_eq!(u, usage(5, 64));
        assert_eq!((d.cached_tokens, d.reasoning_tokens), (5, 64));
        // No output limit asked for: the ceiling.
        let c = UsageCeiling::of_request(Endpoint::Embeddings, &json!({}), 1_000);
        let (mut u, mut d) = (usage(2_000, 3_000), Details::default());
        assert_eq!(c.clamp(&mut u, &mut d), Some("prompt_tokens"));
        assert_eq!(u, usage(1_000, 1_000));
    }
}
