//! Anthropic Messages in front of an OpenAI-chat adapter: the request
//! read into an OpenAI chat request (`request.rs`), the answer and its
//! errors written back as a `message` (here), the stream as Anthropic's
//! events (`events.rs`).

mod events;
mod request;

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Value, json};

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

/// Anthropic's `usage` for the provider's: `input_tokens` without the
/// prompt's cached part, which Anthropic reports apart.
fn usage_json(u: Option<sluice_usage::Usage>, cached: u64) -> Value {
    let u = u.unwrap_or_default();
    let cached = cached.min(u.prompt_tokens);
    json!({
        "input_tokens": u.prompt_tokens - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": u.completion_tokens,
    })
}

/// The inner adapter's OpenAI answer as an Anthropic `message` (or
/// error); its usage, tool calls and details are the provider's.
pub(super) fn answer(mut answer: Answer, model: &str) -> Answer {
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let body = if answer.status.is_success() {
        message(&json, &answer, model)
    } else {
        let message = json["error"]["message"].as_str().map_or_else(
            || String::from_utf8_lossy(&answer.body).into_owned(),
            str::to_owned,
        );
        error_body(answer.status, &message)
    };
    answer.body = Bytes::from(body.to_string());
    answer
}

fn message(json: &Value, answer: &Answer, model: &str) -> Value {
    let choice = &json["choices"][0];
    let msg = &choice["message"];
    let mut content = Vec::new();
    if let Some(text) = msg["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in msg["tool_calls"].as_array().into_iter().flatten() {
        let f = &call["function"];
        let raw = f["arguments"].as_str().unwrap_or("{}");
        // Arguments the model wrote that are not JSON stay visible as
        // text rather than lost.
        let input = serde_json::from_str::<Value>(raw)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"arguments": raw}));
        content.push(json!({
            "type": "tool_use",
            "id": call["id"],
            "name": f["name"],
            "input": input,
        }));
    }
    let id = json["id"].as_str().unwrap_or("sluice");
    json!({
        "id": format!("msg_{id}"),
        "type": "message",
        "role": "assistant",
        "model": json["model"].as_str().unwrap_or(model),
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str().unwrap_or("stop")),
        "stop_sequence": null,
        "usage": usage_json(answer.usage, answer.details.cached_tokens),
    })
}

#[cfg(test)]
mod tests;
