//! OpenAI chat ↔ Gemini `generateContent`: the request, the answer, the
//! stream and errors.

use std::collections::HashMap;

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use sluice_usage::WireFormat;

use crate::providers::translate::{self, Accepts, Chat, Choice, Part, ToolCall, ToolChoice, Turn};
use crate::providers::{Answer, BadField};

/// What `generateContent` can take of an OpenAI chat request.
pub(super) const ACCEPTS: Accepts = Accepts {
    name: "Gemini",
    column: crate::providers::fields::Format::Gemini,
};

/// The `generateContent` body for `chat`; its output limited to
/// `default_max_tokens` (what its reservation assumed) when the client
/// set none.
///
/// # Errors
/// An image given by URL (Gemini takes images inline or from its own file
/// store), or a tool result whose call is not in the conversation (Gemini
/// answers a call by its function's name).
pub(super) fn request(chat: &Chat, default_max_tokens: u64) -> Result<Value, BadField> {
    let mut body = Map::new();
    if !chat.system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": chat.system.join("\n\n")}]}),
        );
    }
    body.insert("contents".into(), Value::Array(contents(&chat.turns)?));
    let mut config = Map::new();
    let numbers = [
        ("temperature", chat.temperature),
        ("topP", chat.top_p),
        ("presencePenalty", chat.presence_penalty),
        ("frequencyPenalty", chat.frequency_penalty),
    ];
    for (key, v) in numbers {
        if let Some(v) = v {
            config.insert(key.into(), json!(v));
        }
    }
    let max = chat.max_tokens.unwrap_or(default_max_tokens);
    config.insert("maxOutputTokens".into(), json!(max));
    if !chat.stop.is_empty() {
        config.insert("stopSequences".into(), json!(chat.stop));
    }
    if chat.n > 1 {
        config.insert("candidateCount".into(), json!(chat.n));
    }
    if let Some(seed) = chat.seed {
        config.insert("seed".into(), json!(seed));
    }
    if chat.json_mode {
        config.insert("responseMimeType".into(), json!("application/json"));
    }
    if let Some(schema) = &chat.json_schema {
        // JSON Schema as it is (`responseSchema` takes OpenAPI's subset).
        config.insert("responseJsonSchema".into(), schema.clone());
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if !chat.tools.is_empty() {
        let declarations: Vec<Value> = chat
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({"name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    f["description"] = json!(d);
                }
                f
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mode = match &chat.tool_choice {
        None => None,
        Some(ToolChoice::Auto) => Some(json!({"mode": "AUTO"})),
        Some(ToolChoice::None) => Some(json!({"mode": "NONE"})),
        Some(ToolChoice::Required) => Some(json!({"mode": "ANY"})),
        Some(ToolChoice::Function(name)) => {
            Some(json!({"mode": "ANY", "allowedFunctionNames": [name]}))
        }
    };
    if let Some(mode) = mode {
        body.insert("toolConfig".into(), json!({"functionCallingConfig": mode}));
    }
    Ok(Value::Object(body))
}

/// The turns as Gemini contents (roles `user` and `model`), contents of
/// the same role in a row made one.
fn contents(turns: &[Turn]) -> Result<Vec<Value>, BadField> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for turn in turns {
        let (role, parts) = match turn {
            Turn::User(parts) => ("user", parts.iter().map(part).collect::<Result<_, _>>()?),
            Turn::Assistant { text, tool_calls } => {
                let mut parts: Vec<Value> = text.iter().map(|t| json!({"text": t})).collect();
                for c in tool_calls {
                    names.insert(&c.id, &c.name);
                    parts.push(json!({"functionCall": {"name": c.name, "args": c.arguments}}));
                }
                ("model", parts)
            }
            Turn::Tool { call_id, content } => {
                let name = names.get(call_id.as_str()).ok_or_else(|| {
                    BadField::new(
                        "messages",
                        format!("tool_call_id {call_id:?} names no earlier assistant tool call"),
                    )
                })?;
                // Gemini wants an object: JSON objects pass as they are.
                let response = match serde_json::from_str::<Value>(content) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"content": content}),
                };
                let part = json!({"functionResponse": {"name": name, "response": response}});
                ("user", vec![part])
            }
        };
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, held)) if *last == role => held.extend(parts),
            _ => out.push((role, parts)),
        }
    }
    Ok(out
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect())
}

fn part(p: &Part) -> Result<Value, BadField> {
    match p {
        Part::Text(t) => Ok(json!({"text": t})),
        Part::Inline { media_type, data } => {
            Ok(json!({"inlineData": {"mimeType": media_type, "data": data}}))
        }
        Part::Url(_) => Err(BadField::new(
            "messages",
            "Gemini takes images inline: send them as data: URLs",
        )),
    }
}

/// OpenAI's `finish_reason` for Gemini's `finishReason`.
pub(super) fn finish_reason(reason: &str, called_tools: bool) -> &'static str {
    match reason {
        "MAX_TOKENS" => "length",
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            "content_filter"
        }
        _ if called_tools => "tool_calls",
        // STOP, OTHER, MALFORMED_FUNCTION_CALL, …
        _ => "stop",
    }
}

/// The choices of one response (or stream chunk).
pub(super) fn choices(json: &Value) -> Vec<(u32, Choice, Option<&str>)> {
    let mut out = Vec::new();
    for (i, c) in json["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let index = c["index"].as_u64().map_or(i as u32, |n| n as u32);
        let mut choice = Choice::default();
        for p in c["content"]["parts"].as_array().into_iter().flatten() {
            // Thought summaries are not the answer.
            if p["thought"] == true {
                continue;
            }
            if let Some(t) = p["text"].as_str() {
                choice.text.get_or_insert_with(String::new).push_str(t);
            }
            if let Some(f) = p.get("functionCall") {
                choice.tool_calls.push(ToolCall {
                    id: f["id"].as_str().unwrap_or_default().to_owned(),
                    name: f["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: f.get("args").cloned().unwrap_or_else(|| json!({})),
                });
            }
        }
        out.push((index, choice, c["finishReason"].as_str()));
    }
    out
}

/// A whole answer (or error) as OpenAI's.
pub(super) fn answer(status: StatusCode, body: &Bytes, model: &str) -> Answer {
    let read = match translate::read(WireFormat::Gemini, "Gemini", status, body) {
        Ok(read) => read,
        Err(unreadable) => return unreadable,
    };
    let json = &read.json;
    if !status.is_success() {
        let error = &json["error"];
        let message = error["message"]
            .as_str()
            .unwrap_or("Gemini refused the request");
        let param = error["details"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|d| d["fieldViolations"][0]["field"].as_str());
        return read.error(message, error["status"].as_str(), param);
    }
    let mut out: Vec<Choice> = Vec::new();
    let mut calls = 0;
    for (_, mut choice, reason) in choices(json) {
        for c in &mut choice.tool_calls {
            if c.id.is_empty() {
                c.id = format!("call_{calls}");
            }
            calls += 1;
        }
        choice.finish_reason =
            finish_reason(reason.unwrap_or("STOP"), !choice.tool_calls.is_empty());
        out.push(choice);
    }
    if out.is_empty() {
        // The prompt itself was blocked (`promptFeedback.blockReason`).
        out.push(Choice {
            finish_reason: "content_filter",
            ..Choice::default()
        });
    }
    let id = json["responseId"].as_str().unwrap_or("chatcmpl-sluice");
    let model = json["modelVersion"].as_str().unwrap_or(model);
    read.completion(id, model, &out)
}

#[cfg(test)]
mod tests;
