//! Gemini `generateContent` clients: the call's body as the gateway
//! carries it (the client's, with the model and stream form from its
//! path), passed to Gemini providers as is (`native`), and in front of an
//! OpenAI-chat adapter: the request read into an OpenAI chat request
//! (`request.rs`), the answer and its errors written back as a
//! `GenerateContentResponse` (here), the stream chunk by chunk
//! (`events.rs`), as server-sent events or as a JSON array.

mod events;
mod request;

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::providers::{Answer, StreamReader};

pub(super) use events::{Form, Writer};
pub(super) use request::to_chat;

/// The fields the gateway adds to a Gemini client's body, which has its
/// model and stream form in its path: none is a Gemini field.
const MODEL: &str = "model";
const STREAM: &str = "stream";
const ALT: &str = "alt";

/// A Gemini client's `body` as the gateway carries it: `model` (as the
/// client named it in the path), whether it streams, and whether the
/// stream is SSE (`?alt=sse`) or a JSON array.
pub(crate) fn carried(mut body: Map<String, Value>, model: &str, stream: bool, sse: bool) -> Value {
    body.insert(MODEL.into(), json!(model));
    body.insert(STREAM.into(), json!(stream));
    if sse {
        body.insert(ALT.into(), json!("sse"));
    }
    Value::Object(body)
}

/// Whether the carried body asks for a JSON-array stream.
pub(crate) fn array_stream(body: &Value) -> bool {
    body.get(STREAM) == Some(&Value::Bool(true))
        && body.get(ALT).and_then(Value::as_str) != Some("sse")
}

/// The client's own body, for a Gemini provider: the carried fields taken
/// out, and the output limited to `default_max_tokens` (what the call's
/// reservation assumed) when the client set none.
pub(crate) fn native(body: &Value, default_max_tokens: u64) -> Value {
    let mut out = body.as_object().cloned().unwrap_or_default();
    for key in [MODEL, STREAM, ALT] {
        out.remove(key);
    }
    let config = out.entry("generationConfig").or_insert_with(|| json!({}));
    if let Some(config) = config.as_object_mut()
        && config.get("maxOutputTokens").is_none_or(Value::is_null)
    {
        config.insert("maxOutputTokens".into(), json!(default_max_tokens));
    }
    Value::Object(out)
}

/// A Gemini SSE stream as the client asked for it: as it is, or as a
/// JSON array.
pub(crate) fn stream_form(sse: Box<dyn StreamReader>, array: bool) -> Box<dyn StreamReader> {
    if array { events::to_array(sse) } else { sse }
}

/// Gemini's `finishReason` for OpenAI's `finish_reason`.
fn finish_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "MAX_TOKENS",
        "content_filter" => "SAFETY",
        _ => "STOP",
    }
}

/// Gemini's error status name for an HTTP status.
fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// Gemini's `usageMetadata` for the provider's usage.
fn usage_metadata(u: Option<sluice_usage::Usage>, cached: u64) -> Value {
    let u = u.unwrap_or_default();
    let mut m = json!({
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.completion_tokens,
        "totalTokenCount": u.total_tokens,
    });
    if cached > 0 {
        m["cachedContentTokenCount"] = json!(cached.min(u.prompt_tokens));
    }
    m
}

/// A tool call as a `functionCall` part; arguments that are not a JSON
/// object stay visible rather than lost.
fn function_call(id: &str, name: &str, arguments: &str) -> Value {
    let args = serde_json::from_str::<Value>(if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    })
    .ok()
    .filter(Value::is_object)
    .unwrap_or_else(|| json!({"arguments": arguments}));
    json!({"functionCall": {"id": id, "name": name, "args": args}})
}

/// The inner adapter's OpenAI answer as a `GenerateContentResponse` (or
/// Gemini's error); its usage, tool calls and details are the provider's.
pub(super) fn answer(mut answer: Answer, model: &str) -> Answer {
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let body = if answer.status.is_success() {
        response(&json, &answer, model)
    } else {
        let message = json["error"]["message"].as_str().map_or_else(
            || String::from_utf8_lossy(&answer.body).into_owned(),
            str::to_owned,
        );
        json!({"error": {"code": answer.status.as_u16(), "message": message,
            "status": status_name(answer.status)}})
    };
    answer.body = Bytes::from(body.to_string());
    answer
}

fn response(json: &Value, answer: &Answer, model: &str) -> Value {
    let candidates: Vec<Value> = json["choices"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, choice)| {
            let msg = &choice["message"];
            let mut parts = Vec::new();
            if let Some(text) = msg["content"].as_str().filter(|t| !t.is_empty()) {
                parts.push(json!({"text": text}));
            }
            for call in msg["tool_calls"].as_array().into_iter().flatten() {
                let f = &call["function"];
                parts.push(function_call(
                    call["id"].as_str().unwrap_or_default(),
                    f["name"].as_str().unwrap_or_default(),
                    f["arguments"].as_str().unwrap_or("{}"),
                ));
            }
            json!({
                "content": {"role": "model", "parts": parts},
                "finishReason": finish_reason(choice["finish_reason"].as_str().unwrap_or("stop")),
                "index": choice["index"].as_u64().unwrap_or(i as u64),
            })
        })
        .collect();
    json!({
        "candidates": candidates,
        "usageMetadata": usage_metadata(answer.usage, answer.details.cached_tokens),
        "modelVersion": json["model"].as_str().unwrap_or(model),
        "responseId": json["id"],
    })
}

#[cfg(test)]
mod tests;
