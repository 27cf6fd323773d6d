//! The token estimate the tokens/min limiter reserves before a call is
//! dispatched. It is settled against the real usage afterwards, so it aims
//! to be close and cheap rather than exact: no tokenizer, characters over a
//! configured characters-per-token ratio plus fixed overheads.

use serde_json::{Map, Value};

use super::Endpoint;
use crate::WireFormat;

/// Tokens added once per chat, messages or responses request: the reply's
/// priming (OpenAI's token-counting guide counts 3).
pub const REQUEST_OVERHEAD_TOKENS: u64 = 3;

/// Tokens added per message (or `/responses` input item) for its role and
/// delimiters (OpenAI's guide counts 3–4; we take the larger).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// Tokens counted for each image, audio, file or document part instead of
/// its (base64 or URL) characters. OpenAI bills a 1024×1024 high-detail
/// image at 765 tokens, Anthropic a 1092×1092 one at about 1,600: a round
/// figure between the two, corrected by the settle.
pub const MEDIA_PART_TOKENS: u64 = 1_000;

/// What a call is expected to use, reserved before dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Estimate {
    /// Estimated input tokens.
    pub prompt_tokens: u64,
    /// The most output tokens the request allows (its `max_tokens` or the
    /// configured default, times `n` for chat); 0 for embeddings.
    pub max_completion_tokens: u64,
    /// `prompt_tokens + max_completion_tokens`.
    pub total: u64,
}

/// Estimates a request's tokens from its JSON body.
///
/// The prompt is every character of text the model reads (message contents
/// as strings or arrays of parts, Anthropic's `system`, `/responses`'
/// `instructions` and `input`, embeddings' `input`, a legacy `prompt`, and
/// the JSON of `tools`, `functions` and `response_format`) divided by
/// `chars_per_token`, rounded up (a ratio of 0 counts as 1), plus
/// [`REQUEST_OVERHEAD_TOKENS`], [`MESSAGE_OVERHEAD_TOKENS`] per message and
/// [`MEDIA_PART_TOKENS`] per image, audio or file part. Identifiers,
/// signatures and base64 payloads inside messages are not text and are not
/// counted. Embeddings given as token ids count one token per id, and
/// embeddings have no overheads.
///
/// The completion is `max_completion_tokens` or else `max_tokens` (OpenAI
/// chat, times `n`), `max_output_tokens` (`/responses`) or `max_tokens`
/// (Anthropic) or `generationConfig.maxOutputTokens` (Gemini, times
/// `candidateCount`), else `default_max_tokens`; 0 for embeddings. A
/// chat request's is its format's ([`crate::Dialect::chat_limit`]).
pub fn estimate(
    format: WireFormat,
    endpoint: Endpoint,
    body: &Value,
    chars_per_token: u64,
    default_max_tokens: u64,
) -> Estimate {
    format
        .dialect()
        .estimate(endpoint, body, chars_per_token, default_max_tokens)
}

impl Estimate {
    /// The estimate of a request whose prompt is `prompt_tokens` and whose
    /// output may run to `max_completion_tokens`.
    pub(crate) fn new(prompt_tokens: u64, max_completion_tokens: u64) -> Estimate {
        Estimate {
            prompt_tokens,
            max_completion_tokens,
            total: prompt_tokens.saturating_add(max_completion_tokens),
        }
    }
}

/// The prompt tokens of a request's body (see [`estimate`]), the same in
/// every format: the fields each one names are counted wherever they are.
pub(crate) fn prompt_tokens(endpoint: Endpoint, body: &Value, chars_per_token: u64) -> u64 {
    let mut count = Count::default();
    match endpoint {
        // Moderations read their `input` as embeddings do; an image's
        // `prompt` is read whole, without a chat's overheads; a
        // transcript's input is audio, priced by the settle.
        Endpoint::Embeddings | Endpoint::Moderations => count.embedding_input(body.get("input")),
        Endpoint::Images | Endpoint::Transcriptions => count.value(body.get("prompt")),
        Endpoint::Completions => {
            count.tokens += REQUEST_OVERHEAD_TOKENS;
            count.embedding_input(body.get("prompt"));
            count.value(body.get("suffix"));
        }
        Endpoint::Chat | Endpoint::Messages | Endpoint::Responses | Endpoint::Generate => {
            count.tokens += REQUEST_OVERHEAD_TOKENS;
            // One walk over the body's fields rather than a lookup per
            // field counted (most are absent); the sums do not depend on
            // the order.
            for (key, v) in body.as_object().into_iter().flatten() {
                match key.as_str() {
                    // Gemini: `contents`, `systemInstruction`.
                    "messages" | "input" | "contents" => count.items(Some(v)),
                    "system" | "instructions" | "prompt" | "systemInstruction" => {
                        count.value(Some(v));
                    }
                    "tools" | "functions" | "response_format" => count.json(Some(v)),
                    "text" => count.json(v.get("format")),
                    _ => {}
                }
            }
        }
    }
    count
        .chars
        .div_ceil(chars_per_token.max(1))
        .saturating_add(count.tokens)
}

/// The output tokens a request may use at most: set by the endpoint's own
/// field, except chat's, which is the format's (`chat`).
pub(crate) fn completion_limit(
    endpoint: Endpoint,
    body: &Value,
    default: u64,
    chat: impl FnOnce() -> u64,
) -> u64 {
    match endpoint {
        // Images and transcripts report their output (image tokens, text)
        // only afterwards: the settle charges it.
        Endpoint::Embeddings
        | Endpoint::Moderations
        | Endpoint::Images
        | Endpoint::Transcriptions => 0,
        Endpoint::Completions => field(body, "max_tokens")
            .unwrap_or(default)
            .saturating_mul(field(body, "n").unwrap_or(1).max(1)),
        Endpoint::Responses => field(body, "max_output_tokens").unwrap_or(default),
        Endpoint::Messages => field(body, "max_tokens").unwrap_or(default),
        // A Gemini body's limit is in `generationConfig`, as a native
        // Gemini chat's is.
        Endpoint::Chat | Endpoint::Generate => chat(),
    }
}

/// A count in the body's top-level `name`.
pub(crate) fn field(body: &Value, name: &str) -> Option<u64> {
    body.get(name).and_then(Value::as_u64)
}

/// Fields inside a message or part that are not read by the model as text:
/// ids, roles, enum tags, cache hints, thinking signatures, base64 payloads
/// and URLs.
const OPAQUE_KEYS: &[&str] = &[
    "type",
    "role",
    "id",
    "call_id",
    "tool_call_id",
    "tool_use_id",
    "signature",
    "data",
    "encrypted_content",
    "cache_control",
    "status",
    "source",
    "url",
    "image_url",
    "file_id",
    "file_data",
    "detail",
];

/// Part types counted as [`MEDIA_PART_TOKENS`] rather than by characters.
const MEDIA_TYPES: &[&str] = &[
    "image",
    "image_url",
    "input_image",
    "input_audio",
    "input_file",
    "file",
    "document",
];

/// Characters of text and tokens already known, as the body is walked.
#[derive(Debug, Default)]
struct Count {
    chars: u64,
    tokens: u64,
}

impl Count {
    fn text(&mut self, s: &str) {
        self.chars = self.chars.saturating_add(s.chars().count() as u64);
    }

    /// A list of messages or input items, each with its overhead; a plain
    /// string (a `/responses` input) is one message.
    fn items(&mut self, v: Option<&Value>) {
        match v {
            Some(Value::Array(items)) => {
                for item in items {
                    self.tokens += MESSAGE_OVERHEAD_TOKENS;
                    self.value(Some(item));
                }
            }
            Some(Value::String(s)) => {
                self.tokens += MESSAGE_OVERHEAD_TOKENS;
                self.text(s);
            }
            _ => {}
        }
    }

    /// The text in a message, a content string or array of parts, or any
    /// item: strings count, except under [`OPAQUE_KEYS`]; media parts count
    /// as [`MEDIA_PART_TOKENS`]; a tool call's `input` counts as its JSON.
    fn value(&mut self, v: Option<&Value>) {
        match v {
            Some(Value::String(s)) => self.text(s),
            Some(Value::Array(items)) => items.iter().for_each(|i| self.value(Some(i))),
            Some(Value::Object(fields)) => self.object(fields),
            _ => {}
        }
    }

    fn object(&mut self, fields: &Map<String, Value>) {
        let kind = fields.get("type").and_then(Value::as_str);
        // Gemini's media parts have no `type`, only their payload's key.
        let gemini_media = fields.contains_key("inlineData") || fields.contains_key("fileData");
        if gemini_media || kind.is_some_and(|k| MEDIA_TYPES.contains(&k)) {
            self.tokens += MEDIA_PART_TOKENS;
            return;
        }
        for (key, v) in fields {
            match key.as_str() {
                k if OPAQUE_KEYS.contains(&k) => {}
                // Anthropic `tool_use`: the model reads the input as JSON.
                "input" if kind == Some("tool_use") => self.json(Some(v)),
                _ => self.value(Some(v)),
            }
        }
    }

    /// Definitions (tools, schemas) the model reads as their JSON text.
    fn json(&mut self, v: Option<&Value>) {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            self.text(&v.to_string());
        }
    }

    /// Embeddings' `input`: a string, strings, or token ids (one token
    /// each), flat or one array per input.
    fn embedding_input(&mut self, v: Option<&Value>) {
        match v {
            Some(Value::String(s)) => self.text(s),
            Some(Value::Number(_)) => self.tokens += 1,
            Some(Value::Array(items)) => items.iter().for_each(|i| self.embedding_input(Some(i))),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
