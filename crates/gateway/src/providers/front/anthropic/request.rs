//! An Anthropic Messages request read into an OpenAI chat request: which
//! fields a provider takes, and the plain renames, are the table's
//! (`providers/fields.rs`).

use serde_json::{Map, Value, json};

use crate::providers::BadField;
use crate::providers::fields::{self, Format};

/// The OpenAI chat name of a field the table renames.
fn openai_name(field: &str) -> Result<&'static str, BadField> {
    fields::renamed(Format::Anthropic, field, Format::Openai)
        .ok_or_else(|| BadField::new(field, "has no OpenAI chat name in the field table"))
}

/// The OpenAI chat request for an Anthropic Messages `body`, to `model`
/// (the name sent upstream) at `provider` (named so in refusals), a
/// provider of format `to`.
///
/// # Errors
/// The first field that is malformed, or that `provider` cannot take (a
/// 400 naming both).
pub(in crate::providers::front) fn to_chat(
    body: &Value,
    model: &str,
    provider: &str,
    to: Format,
) -> Result<Value, BadField> {
    let obj = body
        .as_object()
        .ok_or_else(|| BadField::new("body", "must be a JSON object"))?;
    let unsupported = |field: &str| {
        BadField::new(
            field,
            format!("is not supported when calling {provider} models through /v1/messages"),
        )
    };
    fields::check(obj, Format::Anthropic, to, &unsupported)?;
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    let mut messages = Vec::new();
    if let Some(system) = get("system") {
        messages.push(json!({"role": "system", "content": text(system, "system")?}));
    }
    let items = match get("messages") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => return Err(BadField::new("messages", "must be a non-empty array")),
    };
    for (i, m) in items.iter().enumerate() {
        turn(m, i, provider, &mut messages)?;
    }
    out.insert("messages".into(), Value::Array(messages));
    let max = get("max_tokens")
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1)
        .ok_or_else(|| BadField::new("max_tokens", "is required: an integer of at least 1"))?;
    let limit = crate::providers::openai::limit_field(model);
    out.insert(limit.into(), json!(max));
    if let Some(stop) = get("stop_sequences") {
        let ok = stop
            .as_array()
            .is_some_and(|s| s.iter().all(Value::is_string));
        if !ok {
            return Err(BadField::new(
                "stop_sequences",
                "must be an array of strings",
            ));
        }
        out.insert(openai_name("stop_sequences")?.into(), stop.clone());
    }
    for field in ["temperature", "top_p"] {
        if let Some(v) = get(field) {
            if !v.is_number() {
                return Err(BadField::new(field, "must be a number"));
            }
            out.insert(openai_name(field)?.into(), v.clone());
        }
    }
    match get("stream") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            out.insert("stream".into(), json!(true));
            // The usage goes out in `message_delta`: the provider must
            // send it.
            out.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Some(_) => return Err(BadField::new("stream", "must be a boolean")),
    }
    if let Some(tools) = get("tools") {
        out.insert("tools".into(), self::tools(tools, provider)?);
    }
    if let Some(choice) = get("tool_choice") {
        tool_choice(choice, &mut out)?;
    }
    if let Some(meta) = get("metadata") {
        let meta = meta
            .as_object()
            .ok_or_else(|| BadField::new("metadata", "must be an object"))?;
        for (key, v) in meta {
            match (key.as_str(), v) {
                (_, Value::Null) => {}
                ("user_id", Value::String(u)) => {
                    out.insert("user".into(), json!(u));
                }
                ("user_id", _) => {
                    return Err(BadField::new("metadata.user_id", "must be a string"));
                }
                _ => return Err(unsupported(&format!("metadata.{key}"))),
            }
        }
    }
    if let Some(format) = get("output_format") {
        if format.get("type").and_then(Value::as_str) != Some("json_schema") {
            return Err(BadField::new(
                "output_format.type",
                "must be \"json_schema\"",
            ));
        }
        let schema = format
            .get("schema")
            .filter(|s| s.is_object())
            .ok_or_else(|| BadField::new("output_format.schema", "must be an object"))?;
        out.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}),
        );
    }
    Ok(Value::Object(out))
}

/// The text of `system` or of a tool result: a string, or text blocks.
fn text(v: &Value, field: &str) -> Result<String, BadField> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut out = String::new();
            for (j, b) in blocks.iter().enumerate() {
                let at = || format!("{field}[{j}]");
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(b.get("text").and_then(Value::as_str).ok_or_else(|| {
                            BadField::new(&format!("{}.text", at()), "must be a string")
                        })?);
                    }
                    _ => {
                        return Err(BadField::new(
                            &format!("{}.type", at()),
                            "must be \"text\" here",
                        ));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(BadField::new(
            field,
            "must be a string or an array of text blocks",
        )),
    }
}

/// One Messages turn (`messages[i]`) as OpenAI messages: a user turn's
/// tool results become `tool` messages (before its other blocks, as
/// Anthropic orders them), an assistant's `tool_use` blocks its
/// `tool_calls`. Field names are written only for a refusal.
fn turn(m: &Value, i: usize, provider: &str, out: &mut Vec<Value>) -> Result<(), BadField> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("user" | "assistant")) => Some(r),
        _ => {
            return Err(BadField::new(
                &format!("messages[{i}].role"),
                "must be \"user\" or \"assistant\"",
            ));
        }
    };
    let content = m.get("content").unwrap_or(&Value::Null);
    if let (Some("user"), Value::String(s)) = (role, content) {
        // The common turn: what its one text block becomes, without the
        // block.
        out.push(json!({"role": "user", "content": [{"type": "text", "text": s}]}));
        return Ok(());
    }
    let one;
    let blocks: &[Value] = match content {
        Value::String(s) => {
            one = [json!({"type": "text", "text": s})];
            &one
        }
        Value::Array(b) => b,
        _ => {
            return Err(BadField::new(
                &format!("messages[{i}].content"),
                "must be a string or an array of content blocks",
            ));
        }
    };
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let field = || format!("messages[{i}].content[{j}]");
        let kind = b.get("type").and_then(Value::as_str).unwrap_or_default();
        match (role, kind) {
            (_, "text") => {
                let t = b.get("text").and_then(Value::as_str).ok_or_else(|| {
                    BadField::new(&format!("{}.text", field()), "must be a string")
                })?;
                parts.push(json!({"type": "text", "text": t}));
            }
            (Some("user"), "image") => parts.push(image(b, &field(), provider)?),
            (Some("user"), "tool_result") => {
                let id = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        BadField::new(&format!("{}.tool_use_id", field()), "must be a string")
                    })?;
                let mut text = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(c) => self::text(c, &format!("{}.content", field()))?,
                };
                // OpenAI's tool messages have no error flag: the model
                // reads that the tool failed.
                if b.get("is_error") == Some(&Value::Bool(true)) {
                    text = format!("Error: {text}");
                }
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
            (Some("assistant"), "tool_use") => {
                let id = b.get("id").and_then(Value::as_str);
                let name = b.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(BadField::new(
                        &field(),
                        "a tool_use block needs `id` and `name`",
                    ));
                };
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}}));
            }
            _ => {
                return Err(BadField::new(
                    &format!("{}.type", field()),
                    format!(
                        "{kind:?} blocks are not supported in this turn when calling {provider} \
                         models through /v1/messages"
                    ),
                ));
            }
        }
    }
    match role {
        Some("user") if !parts.is_empty() => out.push(json!({"role": "user", "content": parts})),
        Some("assistant") => {
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            let text = text.concat();
            let content = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let mut msg = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            if !msg["content"].is_null() || msg.get("tool_calls").is_some() {
                out.push(msg);
            }
        }
        _ => {}
    }
    Ok(())
}

/// An image block as an OpenAI `image_url` part.
fn image(b: &Value, field: &str, provider: &str) -> Result<Value, BadField> {
    let source = b.get("source").unwrap_or(&Value::Null);
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str);
            let data = source.get("data").and_then(Value::as_str);
            let (Some(media), Some(data)) = (media, data) else {
                return Err(BadField::new(
                    &format!("{field}.source"),
                    "a base64 source needs `media_type` and `data` strings",
                ));
            };
            format!("data:{media};base64,{data}")
        }
        Some("url") => source
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| BadField::new(&format!("{field}.source.url"), "must be a string"))?
            .to_owned(),
        _ => {
            return Err(BadField::new(
                &format!("{field}.source.type"),
                format!(
                    "must be \"base64\" or \"url\" when calling {provider} models through \
                     /v1/messages"
                ),
            ));
        }
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// Client tools as OpenAI function tools; Anthropic's server tools (web
/// search, code execution, …) have no counterpart.
fn tools(v: &Value, provider: &str) -> Result<Value, BadField> {
    let items = v
        .as_array()
        .ok_or_else(|| BadField::new("tools", "must be an array"))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, t) in items.iter().enumerate() {
        let at = |f: &str| format!("tools[{i}].{f}");
        match t.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(kind) => {
                return Err(BadField::new(
                    &at("type"),
                    format!(
                        "{kind:?} (a server tool) is not supported when calling {provider} \
                         models through /v1/messages"
                    ),
                ));
            }
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| BadField::new(&at("name"), "must be a string"))?;
        let mut f = json!({"name": name});
        if let Some(d) = t.get("description").filter(|d| !d.is_null()) {
            f["description"] = d.clone();
        }
        f["parameters"] = t
            .get("input_schema")
            .filter(|s| s.is_object())
            .cloned()
            .ok_or_else(|| BadField::new(&at("input_schema"), "must be an object"))?;
        out.push(json!({"type": "function", "function": f}));
    }
    Ok(Value::Array(out))
}

/// `tool_choice` as OpenAI's, and `disable_parallel_tool_use` as
/// `parallel_tool_calls: false`.
fn tool_choice(v: &Value, out: &mut Map<String, Value>) -> Result<(), BadField> {
    let choice = match v.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| BadField::new("tool_choice.name", "must be a string"))?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => {
            return Err(BadField::new(
                "tool_choice.type",
                "must be \"auto\", \"any\", \"tool\" or \"none\"",
            ));
        }
    };
    out.insert("tool_choice".into(), choice);
    match v.get("disable_parallel_tool_use") {
        None | Some(Value::Null | Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
        Some(_) => {
            return Err(BadField::new(
                "tool_choice.disable_parallel_tool_use",
                "must be a boolean",
            ));
        }
    }
    Ok(())
}
