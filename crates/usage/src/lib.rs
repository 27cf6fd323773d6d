//! Token usage of model calls, in OpenAI's, Anthropic's and Google Gemini's
//! wire formats:
//! an estimate before dispatch (what the tokens/min limiter reserves), the
//! real figures after the call (what it settles with), from a JSON body or
//! scanned out of a server-sent-event stream on its way to the client;
//! and the response cache ([`cache`]) that answers a repeated request
//! without a call.
//!
//! Pure code: no I/O, nothing of HTTP but the body bytes. The gateway
//! (`sluice-gateway`) estimates before it dispatches a call and settles
//! after it with what this crate finds. Each format is read by its
//! [`Dialect`], one file each in `dialect/`; a new wire format adds its
//! variant to [`WireFormat`], its file there (and the fields it reads to
//! `wire.rs`) and its arm to [`WireFormat::dialect`].
//!
//! ```
//! use serde_json::json;
//! use sluice_usage::{Endpoint, WireFormat, estimate, from_body};
//!
//! // Before the call: what the tokens-per-minute limit should reserve.
//! let request = json!({
//!     "model": "gpt-4o-mini",
//!     "messages": [{"role": "user", "content": "Say hello"}],
//!     "max_tokens": 50,
//! });
//! let reserved = estimate(WireFormat::Openai, Endpoint::Chat, &request, 4, 1_024);
//! assert_eq!(reserved.max_completion_tokens, 50);
//!
//! // After it: what the provider says was used.
//! let answer = br#"{"usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}"#;
//! let used = from_body(WireFormat::Openai, Endpoint::Chat, answer).expect("usage in the body");
//! assert_eq!(used.total_tokens, 12);
//! ```

mod answer;
mod bounds;
pub mod budget;
pub mod cache;
mod details;
mod dialect;
mod estimate;
mod price;
#[cfg(feature = "redis")]
mod redis_link;
mod reported;
mod sse;
mod stream;
mod wire;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use bounds::{MAX_CHOICES, MAX_OUTPUT_TOKENS, check_bounds};
pub use details::{Details, details};
pub use dialect::Dialect;
pub use estimate::{
    Estimate, MEDIA_PART_TOKENS, MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS, estimate,
};
pub use price::{Catalog, Cost, MAX_CATALOG_BYTES, Price, PriceError, PriceTable, Window};
pub use reported::{MAX_CALL_TOKENS, UsageCeiling};
pub use sse::SseEvents;
pub use stream::lean::plain_run as json_plain_run;
// The stream scanner's JSON cursor, for other readers of a few fields
// of small documents (a translated stream's chunks).
pub use stream::lean::{
    Cursor as JsonCursor, Seen as JsonSeen, Str as JsonStr, optional_str as json_optional_str,
};
pub use stream::{AnswerHead, DEFAULT_MAX_EVENT_BYTES, StreamScanner, Tally, error_event};

/// How a provider is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WireFormat {
    /// OpenAI's: `/chat/completions`, `/embeddings`, `/responses`.
    #[default]
    Openai,
    /// Anthropic's: `/messages`.
    Anthropic,
    /// Google Gemini's native API: `models/{model}:generateContent` and
    /// `:streamGenerateContent?alt=sse`, with `usageMetadata`.
    Gemini,
    /// Azure OpenAI: OpenAI's bodies and streams, addressed to a
    /// deployment (`openai/deployments/{deployment}/…?api-version=…`) and
    /// authenticated with `api-key`.
    Azure,
}

/// Which API a model call goes to; it decides which fields carry the
/// prompt, the completion limit and the usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// OpenAI `POST /chat/completions`.
    Chat,
    /// OpenAI `POST /embeddings`: no completion.
    Embeddings,
    /// OpenAI `POST /responses`.
    Responses,
    /// Anthropic `POST /messages`.
    Messages,
    /// Gemini `POST models/{model}:generateContent` (and
    /// `:streamGenerateContent`): `contents`, `systemInstruction`,
    /// `generationConfig`.
    Generate,
    /// OpenAI's legacy `POST /completions`: a `prompt`, `max_tokens`,
    /// usage as chat's.
    Completions,
    /// OpenAI `POST /audio/transcriptions`: a multipart form (the gateway
    /// reads its text fields into a JSON object); usage, when the model
    /// reports tokens, as `/responses`'.
    Transcriptions,
    /// OpenAI `POST /images/generations`: a `prompt`; usage, when the
    /// model reports it, as `/responses`'.
    Images,
    /// OpenAI `POST /moderations`: an `input`, no completion, no usage.
    Moderations,
}

impl Endpoint {
    /// Whether a call to it writes an answer token by token (a chat, a
    /// completion), rather than a result of another kind (vectors,
    /// images, scores, a transcript).
    pub fn generates_text(self) -> bool {
        matches!(
            self,
            Endpoint::Chat
                | Endpoint::Responses
                | Endpoint::Messages
                | Endpoint::Generate
                | Endpoint::Completions
        )
    }
}

/// Tokens a call really used, as the provider reported them.
///
/// `prompt_tokens` includes Anthropic's cache writes and reads
/// (`cache_creation_input_tokens`, `cache_read_input_tokens`), which
/// Anthropic reports apart from `input_tokens` but which count against its
/// input-tokens-per-minute limits all the same.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens (OpenAI `prompt_tokens`/`input_tokens`, Anthropic
    /// `input_tokens` plus cache tokens).
    pub prompt_tokens: u64,
    /// Output tokens, reasoning included (`completion_tokens`/`output_tokens`).
    pub completion_tokens: u64,
    /// The provider's `total_tokens` when it sends one, else the sum.
    pub total_tokens: u64,
}

/// The usage in a non-streamed JSON response body, or `None` when the body
/// is not JSON or carries no usage.
///
/// Reads `usage.prompt_tokens`/`completion_tokens`/`total_tokens` (chat,
/// embeddings), `usage.input_tokens`/`output_tokens`/`total_tokens`
/// (responses, Anthropic), and for Anthropic adds the cache tokens to the
/// input. Embeddings have no completion: it is always 0 there. Gemini
/// reports `usageMetadata` instead (see [`WireFormat::Gemini`]'s fields in
/// `wire.rs`): the prompt is `promptTokenCount` plus
/// `toolUsePromptTokenCount`, the completion `candidatesTokenCount` plus
/// `thoughtsTokenCount`.
pub fn from_body(format: WireFormat, endpoint: Endpoint, body: &[u8]) -> Option<Usage> {
    read_body(format, endpoint, body).usage
}

/// How many tool calls a non-streamed response asked for, for traces:
/// OpenAI `choices[].message.tool_calls` (a legacy `function_call` counts
/// one) and `/responses` `output[]` items of type `function_call`;
/// Anthropic `content[]` blocks of type `tool_use`; Gemini
/// `candidates[].content.parts[]` with a `functionCall`. 0 for anything else.
pub fn tool_calls(format: WireFormat, body: &[u8]) -> u32 {
    read_body(format, Endpoint::Chat, body).tool_calls
}

/// What a non-streamed response body says about itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyFacts {
    /// Its usage ([`from_body`]).
    pub usage: Option<Usage>,
    /// Its tool calls ([`tool_calls`]).
    pub tool_calls: u32,
    /// Its cached input and reasoning output ([`details`]), read in the
    /// same pass as the usage.
    pub details: Details,
}

/// The usage and the tool calls of a non-streamed response body, read in
/// one pass: a typed parse that skips, without building them, the fields
/// it does not name (an embedding's vectors, a completion's text); for
/// OpenAI's bodies, first a JSON cursor that builds nothing and reads
/// the same (`answer.rs`), the typed parse where it cannot be sure. A body
/// that is not JSON has neither; one whose tool-call parts have a shape
/// of their own still has its usage (a second pass for it alone).
pub fn read_body(format: WireFormat, endpoint: Endpoint, body: &[u8]) -> BodyFacts {
    format.dialect().read_body(endpoint, body)
}

/// Whether a request body asks for a streamed (SSE) response
/// (`"stream": true`).
pub fn is_stream(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool) == Some(true)
}

/// Makes an OpenAI chat-completions stream request end with a usage chunk,
/// by setting `stream_options.include_usage` to `true`, and returns whether
/// the client had already asked for that itself. When it had not, the
/// gateway scans the stream with `strip_usage_chunk` so the client gets the
/// stream it asked for.
///
/// Does nothing and returns `false` when the body is not a streaming request
/// (OpenAI rejects `stream_options` without `stream: true`). Call it only for
/// chat completions: `/responses` streams always end with their usage, and
/// Anthropic streams always carry it.
pub fn request_usage_in_stream(body: &mut Value) -> bool {
    if !is_stream(body) {
        return false;
    }
    let Some(request) = body.as_object_mut() else {
        return false;
    };
    if let Some(Value::Object(options)) = request.get_mut("stream_options") {
        let asked = options.get("include_usage").and_then(Value::as_bool) == Some(true);
        options.insert("include_usage".to_owned(), Value::Bool(true));
        return asked;
    }
    // Absent, `null` or junk: the client did not ask, and ours replaces it.
    request.insert(
        "stream_options".to_owned(),
        serde_json::json!({ "include_usage": true }),
    );
    false
}
