//! Anthropic's shapes: messages (whole and as the real event sequence)
//! and the model list.

use bytes::Bytes;
use serde_json::{Value, json};

use super::Reply;
use crate::wire::body::event;

fn stop_reason(r: &Reply) -> &'static str {
    if r.tool.is_some() {
        "tool_use"
    } else if r.truncated {
        "max_tokens"
    } else {
        "end_turn"
    }
}

/// The call's id, as Anthropic's look (`toolu_…`).
fn tool_id(r: &Reply) -> String {
    format!("toolu_{}", r.id)
}

fn message(r: &Reply, content: Value, stop: Value, output_tokens: u64) -> Value {
    json!({
        "id": r.id,
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": r.prompt_tokens - r.cached_tokens(),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": r.cached_tokens(),
            "output_tokens": output_tokens,
        },
    })
}

/// A whole message.
pub(crate) fn reply(r: &Reply) -> Value {
    let content = match &r.tool {
        Some(call) => json!([{"type": "tool_use", "id": tool_id(r), "name": call.name,
            "input": call.arguments}]),
        None => json!([{"type": "text", "text": r.text()}]),
    };
    message(r, content, json!(stop_reason(r)), r.completion_tokens())
}

/// message_start (with `usage.input_tokens`), content_block_start, ping,
/// content_block_delta per token, content_block_stop, message_delta (with
/// `usage.output_tokens`), message_stop.
pub(crate) fn events(r: &Reply) -> Vec<(bool, Bytes)> {
    let ev = |kind: &str, data: Value| event(Some(kind), &data);
    let start = message(r, json!([]), Value::Null, 1);
    // A call's block opens with its id, name and empty input; the input
    // follows as JSON in pieces.
    let block = match &r.tool {
        Some(call) => json!({"type": "tool_use", "id": tool_id(r), "name": call.name, "input": {}}),
        None => json!({"type": "text", "text": ""}),
    };
    let mut out = vec![
        (
            false,
            ev(
                "message_start",
                json!({"type": "message_start", "message": start}),
            ),
        ),
        (
            false,
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": block}),
            ),
        ),
        (false, ev("ping", json!({"type": "ping"}))),
    ];
    for t in &r.tokens {
        let delta = match r.tool {
            Some(_) => json!({"type": "input_json_delta", "partial_json": t}),
            None => json!({"type": "text_delta", "text": t}),
        };
        let delta = json!({"type": "content_block_delta", "index": 0, "delta": delta});
        out.push((true, ev("content_block_delta", delta)));
    }
    out.push((
        false,
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ));
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(r), "stop_sequence": null},
        "usage": {"output_tokens": r.completion_tokens()},
    });
    out.push((false, ev("message_delta", delta)));
    out.push((false, ev("message_stop", json!({"type": "message_stop"}))));
    out
}

/// `GET /v1/models` for a client that sent `anthropic-version`.
pub(crate) fn models(list: &[(String, String)]) -> Value {
    let data: Vec<Value> = list
        .iter()
        .map(|(id, _)| {
            json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"})
        })
        .collect();
    json!({
        "data": data,
        "has_more": false,
        "first_id": list.first().map(|m| &m.0),
        "last_id": list.last().map(|m| &m.0),
    })
}
