//! OpenAI's shapes: chat completions (whole and as chunks), responses,
//! and the model list.

use bytes::Bytes;
use serde_json::{Value, json};

use super::Reply;
use crate::wire::body::event;

fn usage(r: &Reply) -> Value {
    let (p, c) = (r.prompt_tokens, r.completion_tokens());
    json!({
        "prompt_tokens": p,
        "completion_tokens": c,
        "total_tokens": p + c,
        "prompt_tokens_details": {"cached_tokens": r.cached_tokens()},
        "completion_tokens_details": {"reasoning_tokens": r.reasoning_tokens()},
    })
}

fn finish(r: &Reply) -> &'static str {
    if r.tool.is_some() {
        "tool_calls"
    } else if r.truncated {
        "length"
    } else {
        "stop"
    }
}

/// The call's id, as OpenAI's look (`call_…`).
fn call_id(r: &Reply) -> String {
    format!("call_{}", r.id)
}

/// The assistant's message: text, or a call with `content` null.
fn message(r: &Reply) -> Value {
    match &r.tool {
        Some(call) => json!({
            "role": "assistant",
            "content": null,
            "refusal": null,
            "tool_calls": [{
                "id": call_id(r),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }],
        }),
        None => json!({"role": "assistant", "content": r.text(), "refusal": null}),
    }
}

/// A whole `chat.completion`.
pub(crate) fn chat(r: &Reply) -> Value {
    json!({
        "id": r.id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [{
            "index": 0,
            "message": message(r),
            "logprobs": null,
            "finish_reason": finish(r),
        }],
        "usage": usage(r),
    })
}

/// The `chat.completion.chunk` events of a stream, then `[DONE]`; with
/// `include_usage` every chunk carries `"usage": null` and a last chunk
/// with empty `choices` carries the usage, as OpenAI sends them.
pub(crate) fn chat_events(r: &Reply) -> Vec<(bool, Bytes)> {
    let chunk = |choices: Value| {
        let mut c = json!({
            "id": r.id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "choices": choices,
        });
        if r.include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
    // A call: its id and name first, then its arguments in pieces.
    let first = match &r.tool {
        Some(call) => json!({"role": "assistant", "content": null, "tool_calls": [{
            "index": 0, "id": call_id(r), "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]}),
        None => json!({"role": "assistant", "content": ""}),
    };
    let mut out = vec![(false, event(None, &chunk(choice(first, Value::Null))))];
    for t in &r.tokens {
        let delta = match r.tool {
            Some(_) => json!({"tool_calls": [{"index": 0, "function": {"arguments": t}}]}),
            None => json!({"content": t}),
        };
        out.push((true, event(None, &chunk(choice(delta, Value::Null)))));
    }
    out.push((
        false,
        event(None, &chunk(choice(json!({}), json!(finish(r))))),
    ));
    if r.include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage(r);
        out.push((false, event(None, &last)));
    }
    out.push((false, Bytes::from_static(b"data: [DONE]\n\n")));
    out
}

fn message_item(r: &Reply, done: bool) -> Value {
    let content = if done {
        json!([{"type": "output_text", "text": r.text(), "annotations": []}])
    } else {
        json!([])
    };
    json!({
        "type": "message",
        "id": format!("msg_{}", r.id),
        "status": if done { "completed" } else { "in_progress" },
        "role": "assistant",
        "content": content,
    })
}

/// A `response` object of the Responses API, finished or just created.
pub(crate) fn response(r: &Reply, done: bool) -> Value {
    let (p, c) = (r.prompt_tokens, r.completion_tokens());
    let (status, incomplete) = match (done, r.truncated) {
        (false, _) => ("in_progress", Value::Null),
        (true, false) => ("completed", Value::Null),
        (true, true) => ("incomplete", json!({"reason": "max_output_tokens"})),
    };
    json!({
        "id": r.id,
        "object": "response",
        "created_at": r.created,
        "status": status,
        "incomplete_details": incomplete,
        "model": r.model,
        "output": if done { json!([message_item(r, true)]) } else { json!([]) },
        "usage": if done {
            json!({
                "input_tokens": p,
                "input_tokens_details": {"cached_tokens": r.cached_tokens()},
                "output_tokens": c,
                "output_tokens_details": {"reasoning_tokens": r.reasoning_tokens()},
                "total_tokens": p + c,
            })
        } else {
            Value::Null
        },
    })
}

/// The Responses API's stream: created, item and part added, text
/// deltas, then everything done and `response.completed` with usage.
pub(crate) fn response_events(r: &Reply) -> Vec<(bool, Bytes)> {
    let item_id = format!("msg_{}", r.id);
    let mut seq = 0u64;
    let mut ev = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        event(Some(kind), &data)
    };
    let at = json!({"item_id": item_id, "output_index": 0, "content_index": 0});
    let with = |extra: Value| {
        let mut v = at.clone();
        if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(extra.clone());
        }
        v
    };
    let empty_part = json!({"type": "output_text", "text": "", "annotations": []});
    let full_part = json!({"type": "output_text", "text": r.text(), "annotations": []});
    let mut out = vec![
        (
            false,
            ev("response.created", json!({"response": response(r, false)})),
        ),
        (
            false,
            ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": message_item(r, false)}),
            ),
        ),
        (
            false,
            ev(
                "response.content_part.added",
                with(json!({"part": empty_part})),
            ),
        ),
    ];
    for t in &r.tokens {
        out.push((
            true,
            ev("response.output_text.delta", with(json!({"delta": t}))),
        ));
    }
    out.push((
        false,
        ev("response.output_text.done", with(json!({"text": r.text()}))),
    ));
    out.push((
        false,
        ev(
            "response.content_part.done",
            with(json!({"part": full_part})),
        ),
    ));
    out.push((
        false,
        ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": message_item(r, true)}),
        ),
    ));
    let last = if r.truncated {
        "response.incomplete"
    } else {
        "response.completed"
    };
    out.push((false, ev(last, json!({"response": response(r, true)}))));
    out
}

/// `GET /v1/models`.
pub(crate) fn models(list: &[(String, String)]) -> Value {
    let data: Vec<Value> = list
        .iter()
        .map(|(id, owner)| json!({"id": id, "object": "model", "created": 0, "owned_by": owner}))
        .collect();
    json!({"object": "list", "data": data})
}
