//! The shapes of the response fields we read, as serde types: parsing into
//! them skips every other field without building it, which matters for
//! embeddings bodies full of floats and for long completions.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{Endpoint, Usage};
use crate::stream::lean::{Cursor, Seen};

/// A `usage` object in any of the formats; absent fields stay `None`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    input_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    output_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl RawUsage {
    /// A `usage` object read with the cursor, as serde reads it; `None`
    /// when the cursor cannot be sure (then parse it typed).
    pub(super) fn lean(c: &mut Cursor<'_>) -> Option<RawUsage> {
        let mut u = RawUsage::default();
        let mut seen = Seen::default();
        c.object(|c, key| {
            let (bit, slot) = match key {
                "prompt_tokens" => (0, &mut u.prompt_tokens),
                "completion_tokens" => (1, &mut u.completion_tokens),
                "total_tokens" => (2, &mut u.total_tokens),
                "input_tokens" => (3, &mut u.input_tokens),
                "output_tokens" => (4, &mut u.output_tokens),
                "cache_creation_input_tokens" => (5, &mut u.cache_creation_input_tokens),
                "cache_read_input_tokens" => (6, &mut u.cache_read_input_tokens),
                "prompt_tokens_details" | "input_tokens_details" => {
                    seen.first(if key == "prompt_tokens_details" { 7 } else { 8 })?;
                    let details = optional_detail(c, "cached_tokens")?;
                    let slot = if key == "prompt_tokens_details" {
                        &mut u.prompt_tokens_details
                    } else {
                        &mut u.input_tokens_details
                    };
                    *slot = details.map(|cached_tokens| PromptDetails { cached_tokens });
                    return Some(());
                }
                "completion_tokens_details" | "output_tokens_details" => {
                    let completion = key == "completion_tokens_details";
                    seen.first(if completion { 9 } else { 10 })?;
                    let details = optional_detail(c, "reasoning_tokens")?;
                    let slot = if completion {
                        &mut u.completion_tokens_details
                    } else {
                        &mut u.output_tokens_details
                    };
                    *slot = details.map(|reasoning_tokens| CompletionDetails { reasoning_tokens });
                    return Some(());
                }
                _ => return c.skip(),
            };
            seen.first(bit)?;
            *slot = c.optional_u64()?;
            Some(())
        })?;
        Some(u)
    }
}

/// `null` (`None`), or an object whose one field read is `field` (a
/// count, `Some(None)` when absent).
fn optional_detail(c: &mut Cursor<'_>, field: &str) -> Option<Option<Option<u64>>> {
    if c.null()? {
        return Some(None);
    }
    let (mut value, mut seen) = (None, false);
    c.object(|c, key| {
        if key != field {
            return c.skip();
        }
        if seen {
            return None;
        }
        seen = true;
        value = c.optional_u64()?;
        Some(())
    })?;
    Some(Some(value))
}

/// Where a format counts the input read from or written to its prompt
/// cache: a property of its dialect, given to [`RawUsage`]'s readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheTokens {
    /// A breakdown already inside `prompt_tokens` (OpenAI's
    /// `prompt_tokens_details.cached_tokens`, `input_tokens_details` in
    /// `/responses`).
    Inside,
    /// Reported apart from `input_tokens` and added to it (Anthropic's
    /// `cache_creation_input_tokens`, `cache_read_input_tokens`).
    Apart,
}

impl RawUsage {
    /// Input tokens, if the object reports any: with the cache tokens
    /// added where they are reported [`CacheTokens::Apart`].
    pub(super) fn prompt(&self, cache: CacheTokens) -> Option<u64> {
        let base = self.prompt_tokens.or(self.input_tokens);
        match cache {
            CacheTokens::Inside => base,
            CacheTokens::Apart => {
                let parts = [
                    base,
                    self.cache_creation_input_tokens,
                    self.cache_read_input_tokens,
                ];
                parts.into_iter().flatten().reduce(u64::saturating_add)
            }
        }
    }

    /// Output tokens, if the object reports any.
    pub(super) fn completion(&self) -> Option<u64> {
        self.completion_tokens.or(self.output_tokens)
    }

    /// The provider's total, if it sends one.
    pub(super) fn total(&self) -> Option<u64> {
        self.total_tokens
    }

    /// Input read from the provider's prompt cache, if reported: OpenAI's
    /// `prompt_tokens_details.cached_tokens` (`input_tokens_details` in
    /// `/responses`), Anthropic's `cache_read_input_tokens`.
    pub(super) fn cached(&self, cache: CacheTokens) -> Option<u64> {
        match cache {
            CacheTokens::Apart => self.cache_read_input_tokens,
            CacheTokens::Inside => self
                .prompt_tokens_details
                .as_ref()
                .or(self.input_tokens_details.as_ref())
                .and_then(|p| p.cached_tokens),
        }
    }

    /// Output spent on reasoning, if reported: OpenAI's
    /// `completion_tokens_details.reasoning_tokens` (`output_tokens_details`
    /// in `/responses`).
    pub(super) fn reasoning(&self) -> Option<u64> {
        self.completion_tokens_details
            .as_ref()
            .or(self.output_tokens_details.as_ref())
            .and_then(|c| c.reasoning_tokens)
    }

    /// The whole usage, or `None` when the object names no count at all.
    pub(super) fn to_usage(&self, cache: CacheTokens, endpoint: Endpoint) -> Option<Usage> {
        let completion = match endpoint {
            // Embeddings have no completion, whatever a provider puts there.
            Endpoint::Embeddings => self.completion().map(|_| 0),
            _ => self.completion(),
        };
        assemble(self.prompt(cache), completion, self.total())
    }
}

/// A [`Usage`] from the parts known, or `None` when none is.
pub(super) fn assemble(
    prompt: Option<u64>,
    completion: Option<u64>,
    total: Option<u64>,
) -> Option<Usage> {
    if prompt.is_none() && completion.is_none() && total.is_none() {
        return None;
    }
    let prompt_tokens = prompt.unwrap_or(0);
    let completion_tokens = completion.unwrap_or(0);
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: total.unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
    })
}

/// Any object whose `usage` we want (a response body, an Anthropic
/// `message`, a `/responses` `response`).
#[derive(Debug, Deserialize)]
pub(super) struct WithUsage {
    pub(super) usage: Option<RawUsage>,
    /// Anthropic's `message_start` names the answer and its model.
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
}

/// An OpenAI response as the gateway reads it: its usage and the parts
/// that name tool calls, in one pass (the rest is skipped unbuilt).
#[derive(Debug, Deserialize)]
pub(super) struct OpenaiBody {
    pub(super) usage: Option<RawUsage>,
    choices: Option<Vec<Choice>>,
    output: Option<Vec<Typed>>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
}

#[derive(Debug, Deserialize)]
struct ChoiceMessage {
    tool_calls: Option<Vec<IgnoredAny>>,
    function_call: Option<IgnoredAny>,
}

impl OpenaiBody {
    pub(super) fn count(&self) -> u32 {
        let chat = self
            .choices
            .iter()
            .flatten()
            .filter_map(|c| c.message.as_ref());
        let chat: usize = chat
            .map(|m| {
                m.tool_calls.as_ref().map_or(0, Vec::len) + usize::from(m.function_call.is_some())
            })
            .sum();
        saturate(chat + count_typed(self.output.as_deref(), "function_call"))
    }
}

/// An Anthropic message as the gateway reads it: its usage and the
/// blocks that name tool calls, in one pass.
#[derive(Debug, Deserialize)]
pub(super) struct AnthropicBody {
    pub(super) usage: Option<RawUsage>,
    content: Option<Vec<Typed>>,
}

impl AnthropicBody {
    pub(super) fn count(&self) -> u32 {
        saturate(count_typed(self.content.as_deref(), "tool_use"))
    }
}

/// Anything with a `type`: a content block, an output item.
#[derive(Debug, Deserialize)]
pub(super) struct Typed {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
}

pub(super) fn count_typed(items: Option<&[Typed]>, kind: &str) -> usize {
    items
        .unwrap_or_default()
        .iter()
        .filter(|i| i.kind.as_deref() == Some(kind))
        .count()
}

pub(super) fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One OpenAI chat-completions stream chunk.
#[derive(Debug, Deserialize)]
pub(super) struct ChatChunk {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) choices: Option<Vec<ChunkChoice>>,
    pub(super) usage: Option<RawUsage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChunkChoice {
    pub(super) delta: Option<ChunkDelta>,
    /// Set (not null) on a choice's last chunk only.
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChunkDelta {
    pub(super) tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(default)]
    pub(super) content: Chars,
    /// DeepSeek's and others' reasoning text.
    #[serde(default)]
    pub(super) reasoning_content: Chars,
    #[serde(default)]
    pub(super) refusal: Chars,
}

impl ChunkDelta {
    /// The output characters this piece carries.
    pub(super) fn chars(&self) -> u64 {
        let args = self
            .tool_calls
            .iter()
            .flatten()
            .filter_map(|c| c.function.as_ref())
            .map(|f| f.arguments.0)
            .fold(0, u64::saturating_add);
        [self.content.0, self.reasoning_content.0, self.refusal.0]
            .into_iter()
            .fold(args, u64::saturating_add)
    }
}

/// A tool call's piece in a chunk; the first piece of each call carries its
/// `id`, the rest only more arguments.
#[derive(Debug, Deserialize)]
pub(super) struct ToolCallDelta {
    pub(super) id: Option<IgnoredAny>,
    pub(super) function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionDelta {
    #[serde(default)]
    pub(super) arguments: Chars,
}

/// The characters of a text field, counted while it is parsed. A value
/// that is not a string counts 0 and is not an error: an odd field must
/// not cost the usage in the same event.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Chars(pub(super) u64);

impl<'de> Deserialize<'de> for Chars {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Chars;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Chars, E> {
                Ok(Chars(u64::try_from(s.chars().count()).unwrap_or(u64::MAX)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_unit<E>(self) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_none<E>(self) -> Result<Chars, E> {
                Ok(Chars(0))
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Chars, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Chars, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Chars(0))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Chars, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Chars(0))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// One Anthropic stream event.
#[derive(Debug, Deserialize)]
pub(super) struct AnthropicEvent {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    /// `message_start`'s message, with the input usage.
    pub(super) message: Option<WithUsage>,
    /// `message_delta`'s cumulative usage.
    pub(super) usage: Option<RawUsage>,
    /// `content_block_start`'s block.
    pub(super) content_block: Option<Typed>,
    /// `content_block_delta`'s piece of text, JSON or thinking.
    pub(super) delta: Option<AnthropicDelta>,
}

#[derive(Debug, Deserialize)]
pub(super) struct AnthropicDelta {
    #[serde(default)]
    pub(super) text: Chars,
    #[serde(default)]
    pub(super) partial_json: Chars,
    #[serde(default)]
    pub(super) thinking: Chars,
    /// `message_delta`'s reason the answer ended.
    pub(super) stop_reason: Option<String>,
}

impl AnthropicDelta {
    /// The output characters this piece carries.
    pub(super) fn chars(&self) -> u64 {
        self.text
            .0
            .saturating_add(self.partial_json.0)
            .saturating_add(self.thinking.0)
    }
}

/// One OpenAI `/responses` stream event; `response.completed` (or
/// `.incomplete`, `.failed`) carries the whole response with its usage.
#[derive(Debug, Deserialize)]
pub(super) struct ResponsesEvent {
    pub(super) response: Option<ResponseObject>,
    /// The text of `response.output_text.delta`,
    /// `response.function_call_arguments.delta` and the like.
    #[serde(default)]
    pub(super) delta: Chars,
}

#[derive(Debug, Deserialize)]
pub(super) struct ResponseObject {
    pub(super) usage: Option<RawUsage>,
    pub(super) output: Option<Vec<Typed>>,
}

/// Gemini's `usageMetadata`. `cachedContentTokenCount` is a breakdown
/// already inside `promptTokenCount`; tool-use prompts and thoughts are not,
/// and count as input and output.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GeminiUsage {
    prompt_token_count: Option<u64>,
    tool_use_prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    total_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
}

impl GeminiUsage {
    pub(super) fn prompt(&self) -> Option<u64> {
        sum(self.prompt_token_count, self.tool_use_prompt_token_count)
    }

    pub(super) fn completion(&self) -> Option<u64> {
        sum(self.candidates_token_count, self.thoughts_token_count)
    }

    pub(super) fn total(&self) -> Option<u64> {
        self.total_token_count
    }

    /// `cachedContentTokenCount`, if reported.
    pub(super) fn cached(&self) -> Option<u64> {
        self.cached_content_token_count
    }

    /// `thoughtsTokenCount`, if reported.
    pub(super) fn reasoning(&self) -> Option<u64> {
        self.thoughts_token_count
    }

    pub(super) fn to_usage(&self) -> Option<Usage> {
        assemble(self.prompt(), self.completion(), self.total())
    }
}

/// The sum of the parts present, or `None` when neither is.
fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    [a, b].into_iter().flatten().reduce(u64::saturating_add)
}

/// A Gemini `GenerateContentResponse`, whole or one streamed chunk of it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GeminiResponse {
    candidates: Option<Vec<GeminiCandidate>>,
    pub(super) usage_metadata: Option<GeminiUsage>,
}

#[derive(Debug, Deserialize)]
struct GeminiCandidate {
    content: Option<GeminiContent>,
}

#[derive(Debug, Deserialize)]
struct GeminiContent {
    parts: Option<Vec<GeminiPart>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiPart {
    function_call: Option<IgnoredAny>,
    #[serde(default)]
    text: Chars,
}

impl GeminiResponse {
    /// The `functionCall` parts of every candidate: each is a whole call
    /// (a stream sends a call in one chunk, never in pieces).
    pub(super) fn function_calls(&self) -> u32 {
        let parts = self
            .candidates
            .iter()
            .flatten()
            .filter_map(|c| c.content.as_ref()?.parts.as_ref())
            .flatten();
        saturate(parts.filter(|p| p.function_call.is_some()).count())
    }

    /// The characters of text in every candidate's parts (thoughts
    /// included; a function call is counted by its own tokens upstream,
    /// not here).
    pub(super) fn chars(&self) -> u64 {
        self.candidates
            .iter()
            .flatten()
            .filter_map(|c| c.content.as_ref()?.parts.as_ref())
            .flatten()
            .map(|p| p.text.0)
            .fold(0, u64::saturating_add)
    }
}
