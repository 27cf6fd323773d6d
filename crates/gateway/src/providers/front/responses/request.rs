//! An OpenAI Responses request read into an OpenAI chat request, each
//! top-level field by the row of [`FIELDS`] that names it.

use serde_json::{Map, Value, json};

use crate::providers::BadField;

/// The top-level fields another provider can take; any other field with
/// a value is refused, naming it.
const FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "stream",
    "user",
    // Where and how OpenAI would store or bill the call: nothing is
    // stored for a translated call, and neither changes the answer.
    "store",
    "metadata",
    "service_tier",
    "truncation",
];

/// The OpenAI chat request for a Responses `body`, to `model` (the name
/// sent upstream) at `provider`.
///
/// # Errors
/// The first field that is malformed, or that `provider` cannot take (a
/// 400 naming both).
pub(in crate::providers::front) fn to_chat(
    body: &Value,
    model: &str,
    provider: &str,
) -> Result<Value, BadField> {
    let obj = body
        .as_object()
        .ok_or_else(|| BadField::new("body", "must be a JSON object"))?;
    let unsupported = |field: &str| {
        BadField::new(
            field,
            format!("is not supported when calling {provider} models through /v1/responses"),
        )
    };
    for (key, value) in obj {
        if !value.is_null() && !FIELDS.contains(&key.as_str()) {
            return Err(unsupported(key));
        }
    }
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    let mut messages = Vec::new();
    if let Some(i) = get("instructions") {
        let i = i
            .as_str()
            .ok_or_else(|| BadField::new("instructions", "must be a string"))?;
        messages.push(json!({"role": "system", "content": i}));
    }
    match get("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, &format!("input[{i}]"), &unsupported, &mut messages)?;
            }
        }
        _ => {
            return Err(BadField::new(
                "input",
                "must be a string or a non-empty array of items",
            ));
        }
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max) = get("max_output_tokens") {
        let max = max.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
            BadField::new("max_output_tokens", "must be an integer of at least 1")
        })?;
        out.insert(
            crate::providers::openai::limit_field(model).into(),
            json!(max),
        );
    }
    for field in ["temperature", "top_p", "parallel_tool_calls", "user"] {
        if let Some(v) = get(field) {
            out.insert(field.into(), v.clone());
        }
    }
    if get("stream") == Some(&Value::Bool(true)) {
        out.insert("stream".into(), json!(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(tools) = get("tools") {
        out.insert("tools".into(), self::tools(tools, &unsupported)?);
    }
    if let Some(choice) = get("tool_choice") {
        let choice = match choice {
            Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => {
                choice.clone()
            }
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                let name = o
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| BadField::new("tool_choice.name", "must be a string"))?;
                json!({"type": "function", "function": {"name": name}})
            }
            _ => return Err(unsupported("tool_choice")),
        };
        out.insert("tool_choice".into(), choice);
    }
    if let Some(format) = get("text")
        .and_then(|t| t.get("format"))
        .filter(|f| !f.is_null())
    {
        let rf = match format.get("type").and_then(Value::as_str) {
            Some("text") => None,
            Some("json_object") => Some(json!({"type": "json_object"})),
            Some("json_schema") => {
                let name = format
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| BadField::new("text.format.name", "must be a string"))?;
                let schema = format
                    .get("schema")
                    .filter(|s| s.is_object())
                    .ok_or_else(|| BadField::new("text.format.schema", "must be an object"))?;
                Some(
                    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema}}),
                )
            }
            _ => return Err(unsupported("text.format.type")),
        };
        if let Some(rf) = rf {
            out.insert("response_format".into(), rf);
        }
    }
    Ok(Value::Object(out))
}

/// One `input` item as OpenAI chat messages: a function call joins the
/// assistant message before it, an output becomes a `tool` message.
fn input_item(
    item: &Value,
    at: &str,
    unsupported: &dyn Fn(&str) -> BadField,
    out: &mut Vec<Value>,
) -> Result<(), BadField> {
    let str_at = |v: Option<&Value>, f: &str| {
        v.and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| BadField::new(&format!("{at}.{f}"), "must be a string"))
    };
    let kind = item.get("type").and_then(Value::as_str);
    match kind {
        None | Some("message") => {
            let role = str_at(item.get("role"), "role")?;
            let role = match role.as_str() {
                "user" | "assistant" | "system" | "developer" => role,
                _ => {
                    return Err(BadField::new(
                        &format!("{at}.role"),
                        "must be \"user\", \"assistant\", \"system\" or \"developer\"",
                    ));
                }
            };
            let content = match item.get("content") {
                Some(Value::String(s)) => json!(s),
                Some(Value::Array(parts)) => {
                    let mut chat_parts = Vec::with_capacity(parts.len());
                    for (j, p) in parts.iter().enumerate() {
                        let field = format!("{at}.content[{j}]");
                        match p.get("type").and_then(Value::as_str) {
                            Some("input_text" | "output_text") => {
                                let t = p.get("text").and_then(Value::as_str).ok_or_else(|| {
                                    BadField::new(&format!("{field}.text"), "must be a string")
                                })?;
                                chat_parts.push(json!({"type": "text", "text": t}));
                            }
                            Some("input_image") => {
                                let url = p
                                    .get("image_url")
                                    .and_then(Value::as_str)
                                    .ok_or_else(|| unsupported(&format!("{field}.image_url")))?;
                                chat_parts
                                    .push(json!({"type": "image_url", "image_url": {"url": url}}));
                            }
                            _ => return Err(unsupported(&format!("{field}.type"))),
                        }
                    }
                    if role == "user" {
                        Value::Array(chat_parts)
                    } else {
                        // Other roles take text only in chat.
                        let text: Vec<&str> = chat_parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect();
                        json!(text.concat())
                    }
                }
                _ => {
                    return Err(BadField::new(
                        &format!("{at}.content"),
                        "must be a string or an array of content parts",
                    ));
                }
            };
            out.push(json!({"role": role, "content": content}));
        }
        Some("function_call") => {
            let call = json!({
                "id": str_at(item.get("call_id"), "call_id")?,
                "type": "function",
                "function": {
                    "name": str_at(item.get("name"), "name")?,
                    "arguments": str_at(item.get("arguments"), "arguments")?,
                },
            });
            match out.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    if let Some(calls) = last.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        calls.push(call);
                    } else {
                        last["tool_calls"] = json!([call]);
                    }
                }
                _ => out.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        Some("function_call_output") => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Array(_)) => v.to_string(),
                _ => return Err(BadField::new(&format!("{at}.output"), "must be a string")),
            };
            out.push(
                json!({"role": "tool", "tool_call_id": str_at(item.get("call_id"), "call_id")?,
                "content": output}),
            );
        }
        Some(_) => return Err(unsupported(&format!("{at}.type"))),
    }
    Ok(())
}

/// Function tools as chat's; OpenAI's hosted tools (web search, file
/// search, …) have no counterpart at another provider.
fn tools(v: &Value, unsupported: &dyn Fn(&str) -> BadField) -> Result<Value, BadField> {
    let items = v
        .as_array()
        .ok_or_else(|| BadField::new("tools", "must be an array"))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, t) in items.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(unsupported(&format!("tools[{i}].type")));
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| BadField::new(&format!("tools[{i}].name"), "must be a string"))?;
        let mut f = json!({"name": name});
        if let Some(d) = t.get("description").filter(|d| !d.is_null()) {
            f["description"] = d.clone();
        }
        if let Some(p) = t.get("parameters").filter(|p| !p.is_null()) {
            f["parameters"] = p.clone();
        }
        out.push(json!({"type": "function", "function": f}));
    }
    Ok(Value::Array(out))
}
