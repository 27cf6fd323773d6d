//! Translation between the OpenAI chat format and the other wire formats,
//! so that an OpenAI client calls any model through
//! `/v1/chat/completions`: the request is read here into a [`Chat`] (each
//! format's adapter writes its own request from it), and answers, stream
//! chunks and errors are written back here in OpenAI's shapes from what
//! each adapter reads out of its format.
//!
//! A field the target format cannot express is refused with a 400 that
//! names it, never dropped in silence.

mod chat;
mod messages;
mod request;
mod stream;

#[cfg(test)]
mod tests;

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Value, json};
use sluice_usage::{Endpoint, WireFormat};

use super::Answer;

pub(crate) use chat::{Chat, Part, ToolCall, ToolChoice, Turn};
pub(crate) use request::parse;
#[cfg(test)]
pub(crate) use stream::run;
pub(crate) use stream::{Delta, Translated, Translator};

/// The provider a request is translated for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepts {
    /// The provider's name in refusals ("Anthropic", "Gemini").
    pub name: &'static str,
    /// Its column of the field table (`providers/fields.rs`): which
    /// fields it takes.
    pub column: super::fields::Format,
}

/// One choice of a whole answer, as read from the upstream's.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Choice {
    /// The text, `None` when the model only called tools.
    pub text: Option<String>,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// OpenAI's `finish_reason`, already mapped.
    pub finish_reason: &'static str,
}

/// The OpenAI `chat.completion` for a translated answer.
pub(crate) fn completion(
    id: &str,
    model: &str,
    choices: &[Choice],
    usage: Option<sluice_usage::Usage>,
) -> Value {
    let choices: Vec<Value> = choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut message = json!({"role": "assistant", "content": c.text, "refusal": null});
            if !c.tool_calls.is_empty() {
                let calls: Vec<Value> = c.tool_calls.iter().map(ToolCall::to_openai).collect();
                message["tool_calls"] = Value::Array(calls);
            }
            json!({"index": i, "message": message, "logprobs": null, "finish_reason": c.finish_reason})
        })
        .collect();
    let mut body = json!({
        "id": id,
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": choices,
    });
    if let Some(u) = usage {
        body["usage"] = usage_json(u);
    }
    body
}

/// OpenAI's `usage` object.
pub(crate) fn usage_json(u: sluice_usage::Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    })
}

/// Seconds since the epoch, for `created`.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An upstream error answer in OpenAI's shape: `{"error": {"message",
/// "type", "param", "code"}}`, the type from the status as OpenAI names
/// it, the code the upstream's own name for the error (`kind`).
pub(crate) fn error_body(
    status: StatusCode,
    message: &str,
    kind: Option<&str>,
    param: Option<&str>,
) -> Bytes {
    let openai_type = match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    let body = json!({"error": {
        "message": message,
        "type": openai_type,
        "param": param,
        "code": kind,
    }});
    Bytes::from(body.to_string())
}

/// An upstream's whole answer, read: its JSON, and the usage and tool
/// calls sluice-usage finds in it.
#[derive(Debug)]
pub(crate) struct Read {
    pub status: StatusCode,
    pub json: Value,
    pub usage: Option<sluice_usage::Usage>,
    pub tool_calls: u32,
    pub details: sluice_usage::Details,
}

/// Reads the answer of `provider` (in `format`). `Err` is the answer to
/// give at once when the body is not JSON: OpenAI's error shape, a 502 in
/// place of a 200.
pub(crate) fn read(
    format: WireFormat,
    provider: &str,
    status: StatusCode,
    body: &Bytes,
) -> Result<Read, Answer> {
    let facts = sluice_usage::read_body(format, Endpoint::Chat, body);
    match serde_json::from_slice::<Value>(body) {
        Ok(json) => Ok(Read {
            status,
            json,
            usage: facts.usage,
            tool_calls: facts.tool_calls,
            details: facts.details,
        }),
        Err(_) => Err(Answer {
            status: if status.is_success() {
                StatusCode::BAD_GATEWAY
            } else {
                status
            },
            body: unreadable(status, provider, body),
            usage: facts.usage,
            tool_calls: facts.tool_calls,
            details: facts.details,
        }),
    }
}

impl Read {
    /// The upstream's error in OpenAI's shape (see [`error_body`]).
    pub(crate) fn error(&self, message: &str, kind: Option<&str>, param: Option<&str>) -> Answer {
        self.answer(error_body(self.status, message, kind, param))
    }

    /// The translated `chat.completion` (see [`completion`]).
    pub(crate) fn completion(&self, id: &str, model: &str, choices: &[Choice]) -> Answer {
        let body = completion(id, model, choices, self.usage);
        self.answer(Bytes::from(body.to_string()))
    }

    fn answer(&self, body: Bytes) -> Answer {
        Answer {
            status: self.status,
            body,
            usage: self.usage,
            tool_calls: self.tool_calls,
            details: self.details,
        }
    }
}

/// A body that is not the JSON the upstream should send, in OpenAI's
/// error shape with the upstream's status.
pub(crate) fn unreadable(status: StatusCode, provider: &str, body: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    let message = format!("{provider} answered {status} with a body that is not its JSON: {text}");
    let status = if status.is_success() {
        StatusCode::BAD_GATEWAY
    } else {
        status
    };
    error_body(status, &message, Some("upstream_unreadable"), None)
}
