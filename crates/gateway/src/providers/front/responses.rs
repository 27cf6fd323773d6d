//! OpenAI Responses (`/v1/responses`) in front of an adapter that
//! translates OpenAI chat (Anthropic's, Gemini's, Azure's): the request
//! read into a chat request (`request.rs`), the answer written back as a
//! `response` object (here), the stream as the Responses events
//! (`events.rs`). Nothing is stored: `previous_response_id` is refused.

mod events;
mod request;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::providers::Answer;
use crate::providers::translate::{error_body, now};

pub(super) use events::Writer;
pub(super) use request::to_chat;

/// The Responses `usage` for the provider's.
fn usage_json(u: Option<sluice_usage::Usage>, d: sluice_usage::Details) -> Value {
    let u = u.unwrap_or_default();
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": d.cached_tokens},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": d.reasoning_tokens},
        "total_tokens": u.total_tokens,
    })
}

/// A `message` output item holding `text`.
fn message_item(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A `function_call` output item.
fn call_item(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
        "name": name, "arguments": arguments, "status": "completed"})
}

/// The `response` object around `output`.
fn response(id: &str, model: &str, output: Vec<Value>, finish: &str, usage: Value) -> Value {
    let (status, incomplete) = match finish {
        "length" => ("incomplete", json!({"reason": "max_output_tokens"})),
        "content_filter" => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    };
    json!({
        "id": id,
        "object": "response",
        "created_at": now(),
        "status": status,
        "incomplete_details": incomplete,
        "error": null,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    })
}

/// The inner adapter's OpenAI chat answer as a `response` (errors stay
/// in OpenAI's shape, which is the Responses API's too).
pub(super) fn answer(mut answer: Answer, model: &str) -> Answer {
    if !answer.status.is_success() {
        return answer;
    }
    let Ok(json) = serde_json::from_slice::<Value>(&answer.body) else {
        let message = "the provider's answer could not be read";
        answer.body = error_body(answer.status, message, Some("upstream_unreadable"), None);
        return answer;
    };
    let choice = &json["choices"][0];
    let msg = &choice["message"];
    let id = json["id"].as_str().unwrap_or("sluice");
    let mut output = Vec::new();
    if let Some(text) = msg["content"].as_str().filter(|t| !t.is_empty()) {
        output.push(message_item(&format!("msg_{id}"), text));
    }
    for call in msg["tool_calls"].as_array().into_iter().flatten() {
        output.push(call_item(
            call["id"].as_str().unwrap_or_default(),
            call["function"]["name"].as_str().unwrap_or_default(),
            call["function"]["arguments"].as_str().unwrap_or("{}"),
        ));
    }
    let body = response(
        &format!("resp_{id}"),
        json["model"].as_str().unwrap_or(model),
        output,
        choice["finish_reason"].as_str().unwrap_or("stop"),
        usage_json(answer.usage, answer.details),
    );
    answer.body = Bytes::from(body.to_string());
    answer
}

#[cfg(test)]
mod tests;
