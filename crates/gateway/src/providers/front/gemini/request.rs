//! A Gemini `generateContent` request read into an OpenAI chat request:
//! which fields a provider takes, and the plain renames, are the table's
//! (`providers/fields.rs`).

use serde_json::{Map, Value, json};

use super::STREAM;
use crate::providers::BadField;
use crate::providers::fields::{self, Format};

/// The OpenAI chat request for a Gemini client's carried `body`, to
/// `model` (the name sent upstream) at `provider` (named so in refusals),
/// a provider of format `to`.
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
            format!("is not supported when calling {provider} models through generateContent"),
        )
    };
    fields::check(obj, Format::Gemini, to, &unsupported)?;
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    let mut messages = Vec::new();
    if let Some(system) = get("systemInstruction") {
        let text = texts(system.get("parts"), "systemInstruction.parts")?;
        messages.push(json!({"role": "system", "content": text}));
    }
    let contents = match get("contents") {
        Some(Value::Array(c)) if !c.is_empty() => c,
        _ => return Err(BadField::new("contents", "must be a non-empty array")),
    };
    let mut calls = Calls::default();
    for (i, c) in contents.iter().enumerate() {
        content(
            c,
            &format!("contents[{i}]"),
            provider,
            &mut calls,
            &mut messages,
        )?;
    }
    out.insert("messages".into(), Value::Array(messages));
    if get(STREAM) == Some(&Value::Bool(true)) {
        out.insert("stream".into(), json!(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(config) = get("generationConfig") {
        generation_config(config, model, &unsupported, &mut out)?;
    }
    if let Some(tools) = get("tools") {
        out.insert("tools".into(), self::tools(tools, &unsupported)?);
    }
    if let Some(config) = get("toolConfig") {
        tool_config(config, &mut out)?;
    }
    Ok(Value::Object(out))
}

/// The joined text of `parts` that may hold only text.
fn texts(parts: Option<&Value>, field: &str) -> Result<String, BadField> {
    let parts = parts
        .and_then(Value::as_array)
        .ok_or_else(|| BadField::new(field, "must be an array of parts"))?;
    let mut out = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let t = p
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| BadField::new(&format!("{field}[{j}].text"), "must be a string"))?;
        out.push(t);
    }
    Ok(out.join("\n"))
}

/// The calls the model made, to give each response the id of its call:
/// Gemini answers a call by its function's name (and an `id` where the
/// model gave one), OpenAI by the call's id.
#[derive(Default)]
struct Calls {
    /// (id, name) of calls not answered yet, in order.
    open: Vec<(String, String)>,
    made: usize,
}

impl Calls {
    fn call(&mut self, id: Option<&str>, name: &str) -> String {
        self.made += 1;
        let id = id.map_or_else(|| format!("call_{}_{name}", self.made), str::to_owned);
        self.open.push((id.clone(), name.to_owned()));
        id
    }

    fn answer(&mut self, id: Option<&str>, name: &str) -> Option<String> {
        let at = self
            .open
            .iter()
            .position(|(i, n)| id.map_or(n == name, |id| i == id))?;
        Some(self.open.remove(at).0)
    }
}

/// One `contents` entry as OpenAI messages.
fn content(
    c: &Value,
    at: &str,
    provider: &str,
    calls: &mut Calls,
    out: &mut Vec<Value>,
) -> Result<(), BadField> {
    let role = c.get("role").and_then(Value::as_str).unwrap_or("user");
    if !matches!(role, "user" | "model") {
        return Err(BadField::new(
            &format!("{at}.role"),
            "must be \"user\" or \"model\"",
        ));
    }
    let parts = c
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| BadField::new(&format!("{at}.parts"), "must be an array of parts"))?;
    let mut user_parts = Vec::new();
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let field = format!("{at}.parts[{j}]");
        let str_of = |v, f: &str| str_at(v, &field, f);
        if p.get("thought") == Some(&Value::Bool(true)) {
            return Err(BadField::new(
                &format!("{field}.thought"),
                format!("thought parts are not supported when calling {provider} models"),
            ));
        }
        if let Some(t) = p.get("text") {
            let t = str_of(Some(t), "text")?;
            if role == "model" {
                text.push_str(t);
            } else {
                user_parts.push(json!({"type": "text", "text": t}));
            }
        } else if let Some(data) = p.get("inlineData").filter(|_| role == "user") {
            let mime = str_of(data.get("mimeType"), "inlineData.mimeType")?;
            let bytes = str_of(data.get("data"), "inlineData.data")?;
            if !mime.starts_with("image/") {
                return Err(BadField::new(
                    &format!("{field}.inlineData.mimeType"),
                    format!("only images can be sent to {provider} models through generateContent"),
                ));
            }
            let url = format!("data:{mime};base64,{bytes}");
            user_parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
        } else if let Some(f) = p.get("functionCall").filter(|_| role == "model") {
            let name = str_of(f.get("name"), "functionCall.name")?;
            let id = calls.call(f.get("id").and_then(Value::as_str), name);
            let args = f.get("args").cloned().unwrap_or_else(|| json!({}));
            tool_calls.push(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}));
        } else if let Some(f) = p.get("functionResponse").filter(|_| role == "user") {
            let name = str_of(f.get("name"), "functionResponse.name")?;
            let id = calls
                .answer(f.get("id").and_then(Value::as_str), name)
                .ok_or_else(|| {
                    BadField::new(
                        &format!("{field}.functionResponse.name"),
                        format!("answers no earlier functionCall of {name:?}"),
                    )
                })?;
            let response = f.get("response").cloned().unwrap_or_else(|| json!({}));
            out.push(json!({"role": "tool", "tool_call_id": id, "content": response.to_string()}));
        } else {
            let kind = p
                .as_object()
                .and_then(|o| o.keys().next())
                .map_or("an empty part", String::as_str);
            return Err(BadField::new(
                &field,
                format!(
                    "{kind:?} parts are not supported in a {role} turn when calling {provider} \
                     models through generateContent"
                ),
            ));
        }
    }
    if role == "model" {
        if !text.is_empty() || !tool_calls.is_empty() {
            let content = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let mut m = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                m["tool_calls"] = Value::Array(tool_calls);
            }
            out.push(m);
        }
    } else if !user_parts.is_empty() {
        out.push(json!({"role": "user", "content": user_parts}));
    }
    Ok(())
}

/// The string `v`, else a 400 naming `{field}.{f}`.
fn str_at<'a>(v: Option<&'a Value>, field: &str, f: &str) -> Result<&'a str, BadField> {
    v.and_then(Value::as_str)
        .ok_or_else(|| BadField::new(&format!("{field}.{f}"), "must be a string"))
}

fn generation_config(
    config: &Value,
    model: &str,
    unsupported: &dyn Fn(&str) -> BadField,
    out: &mut Map<String, Value>,
) -> Result<(), BadField> {
    let config = config
        .as_object()
        .ok_or_else(|| BadField::new("generationConfig", "must be an object"))?;
    // The plain renames (the table has refused what the provider cannot
    // take); the rest is read below.
    for (key, v) in config {
        let field = format!("generationConfig.{key}");
        if let Some(to) = fields::renamed(Format::Gemini, &field, Format::Openai)
            && !v.is_null()
        {
            out.insert(to.into(), v.clone());
        }
    }
    if let Some(max) = config.get("maxOutputTokens").filter(|v| !v.is_null()) {
        let max = max.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
            BadField::new(
                "generationConfig.maxOutputTokens",
                "must be an integer of at least 1",
            )
        })?;
        out.insert(
            crate::providers::openai::limit_field(model).into(),
            json!(max),
        );
    }
    let mime = config.get("responseMimeType").and_then(Value::as_str);
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
        .filter(|s| !s.is_null());
    match (mime, schema) {
        (None | Some("text/plain"), None) => {}
        (Some("application/json"), None) => {
            out.insert("response_format".into(), json!({"type": "json_object"}));
        }
        (Some("application/json") | None, Some(schema)) => {
            out.insert(
                "response_format".into(),
                json!({"type": "json_schema",
                    "json_schema": {"name": "response", "schema": json_schema(schema)}}),
            );
        }
        _ => return Err(unsupported("generationConfig.responseMimeType")),
    }
    Ok(())
}

/// A Gemini schema (OpenAPI's subset, types in capitals) as JSON Schema.
fn json_schema(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => json!(t.to_ascii_lowercase()),
                        _ => json_schema(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        _ => v.clone(),
    }
}

fn tools(v: &Value, unsupported: &dyn Fn(&str) -> BadField) -> Result<Value, BadField> {
    let items = v
        .as_array()
        .ok_or_else(|| BadField::new("tools", "must be an array"))?;
    let mut out = Vec::new();
    for (i, t) in items.iter().enumerate() {
        let obj = t
            .as_object()
            .ok_or_else(|| BadField::new(&format!("tools[{i}]"), "must be an object"))?;
        for (key, v) in obj {
            if key != "functionDeclarations" && !v.is_null() {
                // Google Search, code execution, …: Google's own tools.
                return Err(unsupported(&format!("tools[{i}].{key}")));
            }
        }
        let decls = obj.get("functionDeclarations").and_then(Value::as_array);
        for (j, d) in decls.into_iter().flatten().enumerate() {
            let at = |f: &str| format!("tools[{i}].functionDeclarations[{j}].{f}");
            let name = d
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| BadField::new(&at("name"), "must be a string"))?;
            let mut f = json!({"name": name});
            if let Some(desc) = d.get("description").filter(|x| !x.is_null()) {
                f["description"] = desc.clone();
            }
            let params = d
                .get("parametersJsonSchema")
                .or_else(|| d.get("parameters"))
                .filter(|p| !p.is_null());
            f["parameters"] =
                params.map_or_else(|| json!({"type": "object", "properties": {}}), json_schema);
            out.push(json!({"type": "function", "function": f}));
        }
    }
    Ok(Value::Array(out))
}

fn tool_config(v: &Value, out: &mut Map<String, Value>) -> Result<(), BadField> {
    let Some(fc) = v.get("functionCallingConfig").filter(|f| !f.is_null()) else {
        return Ok(());
    };
    let names = fc.get("allowedFunctionNames").and_then(Value::as_array);
    let choice = match fc.get("mode").and_then(Value::as_str) {
        None | Some("AUTO" | "MODE_UNSPECIFIED") => json!("auto"),
        Some("NONE") => json!("none"),
        Some("ANY") => match names.map(Vec::as_slice) {
            Some([one]) => {
                let name = one.as_str().ok_or_else(|| {
                    BadField::new(
                        "toolConfig.functionCallingConfig.allowedFunctionNames[0]",
                        "must be a string",
                    )
                })?;
                json!({"type": "function", "function": {"name": name}})
            }
            None | Some([]) => json!("required"),
            Some(_) => {
                return Err(BadField::new(
                    "toolConfig.functionCallingConfig.allowedFunctionNames",
                    "may name one function when the provider is not Gemini",
                ));
            }
        },
        Some(_) => {
            return Err(BadField::new(
                "toolConfig.functionCallingConfig.mode",
                "must be \"AUTO\", \"ANY\" or \"NONE\"",
            ));
        }
    };
    out.insert("tool_choice".into(), choice);
    Ok(())
}
