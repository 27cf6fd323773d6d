//! A stored whole answer replayed as the stream the client asked for, in
//! its endpoint's event format.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::Endpoint;

/// Why a stored answer cannot be replayed as a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The endpoint has no streamed form (embeddings).
    #[error("the {0:?} endpoint does not stream")]
    NotStreamed(Endpoint),
    /// The stored body is not the JSON answer the endpoint returns.
    #[error("the stored answer is not a {0:?} JSON answer")]
    Malformed(Endpoint),
}

/// The SSE body that streams `body`, a stored whole answer to `endpoint`:
/// OpenAI chat completion chunks ending in `data: [DONE]`, with the usage
/// in a last chunk of its own when `include_usage`
/// (`stream_options.include_usage`); Anthropic message events from
/// `message_start` to `message_stop`; `/responses` events from
/// `response.created` to `response.completed`. Each piece of text comes in
/// one delta.
///
/// # Errors
///
/// [`ReplayError`] for embeddings and for a body of the wrong shape.
pub fn replay_stream(
    endpoint: Endpoint,
    body: &[u8],
    include_usage: bool,
) -> Result<Bytes, ReplayError> {
    let malformed = || ReplayError::Malformed(endpoint);
    let answer: Map<String, Value> = serde_json::from_slice(body).map_err(|_| malformed())?;
    let mut out = Vec::with_capacity(body.len() + 512);
    match endpoint {
        Endpoint::Embeddings
        | Endpoint::Generate
        | Endpoint::Completions
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => {
            return Err(ReplayError::NotStreamed(endpoint));
        }
        Endpoint::Chat => chat(&mut out, &answer, include_usage).ok_or_else(malformed)?,
        Endpoint::Messages => messages(&mut out, &answer).ok_or_else(malformed)?,
        Endpoint::Responses => responses(&mut out, &answer).ok_or_else(malformed)?,
    }
    Ok(Bytes::from(out))
}

fn event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // Serialising a Value into a Vec cannot fail; the JSON has no newline.
    let _ = serde_json::to_writer(&mut *out, data);
    out.extend_from_slice(b"\n\n");
}

fn chat(out: &mut Vec<u8>, answer: &Map<String, Value>, include_usage: bool) -> Option<()> {
    let choices = answer.get("choices")?.as_array()?;
    let mut base = Map::new();
    for field in [
        "id",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
    ] {
        if let Some(v) = answer.get(field) {
            base.insert(field.to_owned(), v.clone());
        }
    }
    base.insert("object".to_owned(), json!("chat.completion.chunk"));
    if include_usage {
        base.insert("usage".to_owned(), Value::Null);
    }
    let chunk = |out: &mut Vec<u8>, choice: Value| {
        let mut c = base.clone();
        c.insert("choices".to_owned(), json!([choice]));
        event(out, None, &Value::Object(c));
    };
    for (i, choice) in choices.iter().enumerate() {
        let index = choice.get("index").cloned().unwrap_or(json!(i));
        let message = choice.get("message")?.as_object()?;
        let delta =
            |d: Value| json!({"index": index, "delta": d, "logprobs": null, "finish_reason": null});
        let role = message.get("role").cloned().unwrap_or(json!("assistant"));
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        chunk(out, delta(json!({"role": role, "content": content})));
        if let Some(refusal) = message.get("refusal").filter(|r| !r.is_null()) {
            chunk(out, delta(json!({"refusal": refusal})));
        }
        if let Some(call) = message.get("function_call").filter(|c| !c.is_null()) {
            chunk(out, delta(json!({"function_call": call})));
        }
        let calls = message.get("tool_calls").and_then(Value::as_array);
        for (j, call) in calls.into_iter().flatten().enumerate() {
            let mut call = call.as_object()?.clone();
            call.insert("index".to_owned(), json!(j));
            chunk(out, delta(json!({"tool_calls": [call]})));
        }
        let finish = choice
            .get("finish_reason")
            .cloned()
            .unwrap_or(json!("stop"));
        chunk(
            out,
            json!({"index": index, "delta": {}, "logprobs": null, "finish_reason": finish}),
        );
    }
    if include_usage {
        let mut last = base.clone();
        last.insert("choices".to_owned(), json!([]));
        last.insert(
            "usage".to_owned(),
            answer.get("usage").cloned().unwrap_or(Value::Null),
        );
        event(out, None, &Value::Object(last));
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Some(())
}

fn messages(out: &mut Vec<u8>, answer: &Map<String, Value>) -> Option<()> {
    let blocks = answer.get("content")?.as_array()?;
    let usage = answer.get("usage").and_then(Value::as_object);
    let mut start = answer.clone();
    start.insert("content".to_owned(), json!([]));
    start.insert("stop_reason".to_owned(), Value::Null);
    start.insert("stop_sequence".to_owned(), Value::Null);
    if let Some(usage) = usage {
        let mut at_start = usage.clone();
        at_start.insert("output_tokens".to_owned(), json!(0));
        start.insert("usage".to_owned(), Value::Object(at_start));
    }
    event(
        out,
        Some("message_start"),
        &json!({"type": "message_start", "message": start}),
    );
    for (index, block) in blocks.iter().enumerate() {
        let block = block.as_object()?;
        let kind = block.get("type")?.as_str()?;
        let (first, deltas) = split_block(kind, block);
        let e = json!({"type": "content_block_start", "index": index, "content_block": first});
        event(out, Some("content_block_start"), &e);
        for delta in deltas {
            let e = json!({"type": "content_block_delta", "index": index, "delta": delta});
            event(out, Some("content_block_delta"), &e);
        }
        let e = json!({"type": "content_block_stop", "index": index});
        event(out, Some("content_block_stop"), &e);
    }
    let output_tokens = usage
        .and_then(|u| u.get("output_tokens"))
        .cloned()
        .unwrap_or(json!(0));
    let delta = json!({
        "type": "message_delta",
        "delta": {
            "stop_reason": answer.get("stop_reason").cloned().unwrap_or(Value::Null),
            "stop_sequence": answer.get("stop_sequence").cloned().unwrap_or(Value::Null),
        },
        "usage": {"output_tokens": output_tokens},
    });
    event(out, Some("message_delta"), &delta);
    event(out, Some("message_stop"), &json!({"type": "message_stop"}));
    Some(())
}

/// A content block as its `content_block_start` shows it, and the deltas
/// that complete it.
fn split_block(kind: &str, block: &Map<String, Value>) -> (Value, Vec<Value>) {
    let field = |name: &str| block.get(name).cloned().unwrap_or(Value::Null);
    match kind {
        "text" => {
            let mut deltas = vec![json!({"type": "text_delta", "text": field("text")})];
            let citations = block.get("citations").and_then(Value::as_array);
            for citation in citations.into_iter().flatten() {
                deltas.push(json!({"type": "citations_delta", "citation": citation}));
            }
            (json!({"type": "text", "text": ""}), deltas)
        }
        "tool_use" => {
            let input = serde_json::to_string(&field("input")).unwrap_or_default();
            let first =
                json!({"type": "tool_use", "id": field("id"), "name": field("name"), "input": {}});
            (
                first,
                vec![json!({"type": "input_json_delta", "partial_json": input})],
            )
        }
        "thinking" => {
            let mut deltas = vec![json!({"type": "thinking_delta", "thinking": field("thinking")})];
            if let Some(signature) = block.get("signature") {
                deltas.push(json!({"type": "signature_delta", "signature": signature}));
            }
            (json!({"type": "thinking", "thinking": ""}), deltas)
        }
        // Other blocks (redacted thinking, server tool results) come whole.
        _ => (Value::Object(block.clone()), Vec::new()),
    }
}

fn responses(out: &mut Vec<u8>, answer: &Map<String, Value>) -> Option<()> {
    let output = answer.get("output")?.as_array()?;
    let mut seq = 0u64;
    let mut emit = |out: &mut Vec<u8>, kind: &str, mut fields: Map<String, Value>| {
        fields.insert("type".to_owned(), json!(kind));
        fields.insert("sequence_number".to_owned(), json!(seq));
        seq += 1;
        event(out, Some(kind), &Value::Object(fields));
    };
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut created = answer.clone();
    created.insert("status".to_owned(), json!("in_progress"));
    created.insert("output".to_owned(), json!([]));
    created.insert("usage".to_owned(), Value::Null);
    emit(out, "response.created", obj(json!({"response": created})));
    for (output_index, item) in output.iter().enumerate() {
        let item_id = item.get("id").cloned().unwrap_or(Value::Null);
        let mut added = item.as_object()?.clone();
        let parts = added.get("content").and_then(Value::as_array).cloned();
        if parts.is_some() {
            added.insert("content".to_owned(), json!([]));
            added.insert("status".to_owned(), json!("in_progress"));
        }
        emit(
            out,
            "response.output_item.added",
            obj(json!({"output_index": output_index, "item": added})),
        );
        for (content_index, part) in parts.iter().flatten().enumerate() {
            let at = json!({"item_id": item_id, "output_index": output_index, "content_index": content_index});
            let with = |extra: Value| {
                let mut m = obj(at.clone());
                m.extend(obj(extra));
                m
            };
            let text = part
                .get("text")
                .filter(|_| part.get("type") == Some(&json!("output_text")));
            let empty = match text {
                Some(_) => json!({"type": "output_text", "text": "", "annotations": []}),
                None => part.clone(),
            };
            emit(
                out,
                "response.content_part.added",
                with(json!({"part": empty})),
            );
            if let Some(text) = text {
                emit(
                    out,
                    "response.output_text.delta",
                    with(json!({"delta": text})),
                );
                emit(
                    out,
                    "response.output_text.done",
                    with(json!({"text": text})),
                );
            }
            emit(
                out,
                "response.content_part.done",
                with(json!({"part": part})),
            );
        }
        emit(
            out,
            "response.output_item.done",
            obj(json!({"output_index": output_index, "item": item})),
        );
    }
    emit(out, "response.completed", obj(json!({"response": answer})));
    Some(())
}
