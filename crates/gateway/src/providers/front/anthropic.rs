//! Anthropic Messages in front of an OpenAI-chat adapter: the request
//! read into an OpenAI chat request (`request.rs`), the answer and its
//! errors written back as a `message` (here), the stream as Anthropic's
//! events (`events.rs`).

mod events;
mod request;

use axum::http::StatusCode;
use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::{Value, json};

use super::chat;
use crate::providers::Answer;

pub(super) use events::Writer;
pub(super) use request::to_chat;

/// Anthropic's `stop_reason` for OpenAI's `finish_reason`.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// Anthropic's error `type` for a status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 | 503 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Anthropic's error body.
fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// Anthropic's `usage`.
#[derive(Serialize)]
struct UsageJson {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    output_tokens: u64,
}

/// Anthropic's `usage` for the provider's: `input_tokens` without the
/// prompt's cached part, which Anthropic reports apart.
fn usage_json(u: Option<sluice_usage::Usage>, cached: u64) -> UsageJson {
    let u = u.unwrap_or_default();
    let cached = cached.min(u.prompt_tokens);
    UsageJson {
        input_tokens: u.prompt_tokens - cached,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
        output_tokens: u.completion_tokens,
    }
}

/// The inner adapter's OpenAI answer as an Anthropic `message` (or
/// error); its usage, tool calls and details are the provider's.
pub(super) fn answer(mut answer: Answer, model: &str) -> Answer {
    answer.body = if answer.status.is_success() {
        message(&chat::completion(&answer.body), &answer, model)
    } else {
        let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let message = json["error"]["message"].as_str().map_or_else(
            || String::from_utf8_lossy(&answer.body).into_owned(),
            str::to_owned,
        );
        Bytes::from(error_body(answer.status, &message).to_string())
    };
    answer
}

/// The `message` for a completion `read`, written as it is read, its
/// fields in Anthropic's order (no tree).
fn message(read: &chat::Completion<'_>, answer: &Answer, model: &str) -> Bytes {
    let choice = read.choice.as_ref();
    let mut out = BytesMut::with_capacity(256);
    out.put_slice(br#"{"id":"msg_"#);
    put_contents(&mut out, read.id.as_deref().unwrap_or("sluice"));
    out.put_slice(br#"","type":"message","role":"assistant","model":"#);
    put_str(&mut out, read.model.as_deref().unwrap_or(model));
    out.put_slice(br#","content":["#);
    let mut first = true;
    let mut comma = |out: &mut BytesMut| {
        if !std::mem::take(&mut first) {
            out.put_u8(b',');
        }
    };
    if let Some(text) = choice.and_then(chat::Answered::text) {
        comma(&mut out);
        out.put_slice(br#"{"type":"text","text":"#);
        put_str(&mut out, text);
        out.put_u8(b'}');
    }
    for call in choice.map(chat::Answered::tool_calls).unwrap_or_default() {
        let raw = call.arguments();
        // Arguments the model wrote that are not JSON stay visible as
        // text rather than lost.
        let input = serde_json::from_str::<Value>(raw)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"arguments": raw}));
        comma(&mut out);
        out.put_slice(br#"{"type":"tool_use","id":"#);
        put_json(&mut out, &call.id);
        out.put_slice(br#","name":"#);
        put_json(&mut out, call.name());
        out.put_slice(br#","input":"#);
        put_json(&mut out, &input);
        out.put_u8(b'}');
    }
    let finish = choice.and_then(|c| c.finish_reason.as_deref());
    out.put_slice(br#"],"stop_reason":""#);
    out.put_slice(stop_reason(finish.unwrap_or("stop")).as_bytes());
    out.put_slice(br#"","stop_sequence":null,"usage":"#);
    put_json(
        &mut out,
        &usage_json(answer.usage, answer.details.cached_tokens),
    );
    out.put_u8(b'}');
    out.freeze()
}

fn put_index(out: &mut BytesMut, index: usize) {
    out.put_slice(itoa::Buffer::new().format(index).as_bytes());
}

/// `s` as a JSON string.
fn put_str(out: &mut BytesMut, s: &str) {
    out.put_u8(b'"');
    put_contents(out, s);
    out.put_u8(b'"');
}

/// `s` as the inside of a JSON string: as it is when nothing in it needs
/// an escape (most of what a model writes), else escaped as serde_json
/// escapes it.
fn put_contents(out: &mut BytesMut, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.put_slice(s.as_bytes());
        return;
    }
    let quoted = serde_json::to_string(s).unwrap_or_default();
    let inside = quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or_default();
    out.put_slice(inside.as_bytes());
}

/// `value` as JSON, for what a message has once (its usage, a tool
/// call's input).
fn put_json(out: &mut BytesMut, value: &impl Serialize) {
    // Writing into memory fails only for what cannot be JSON, which none
    // of these is.
    let _ = serde_json::to_writer(out.writer(), value);
}

#[cfg(test)]
mod tests;
