//! OpenAI chat ↔ Anthropic messages: the request, the answer, the stream
//! and errors.

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use sluice_usage::WireFormat;

use crate::providers::translate::{
    self, Accepts, Chat, Choice, Delta, Part, ToolCall, ToolChoice, Translator, Turn,
};
use crate::providers::{Answer, BadField};

/// What Anthropic's messages API can take of an OpenAI chat request.
pub(super) const ACCEPTS: Accepts = Accepts {
    name: "Anthropic",
    column: crate::providers::fields::Format::Anthropic,
};

/// The tool a JSON-mode request forces Anthropic to call, its input the
/// JSON answer: Anthropic has no JSON mode of its own for every model.
/// Its call comes back to the client as the answer's text.
pub(super) const JSON_TOOL: &str = "sluice_json_answer";

/// `max_tokens` when the client sets none: Anthropic requires one, and
/// every current Claude model allows this many.
pub(super) const DEFAULT_MAX_TOKENS: u64 = 4_096;

/// The messages request for `chat`.
///
/// # Errors
/// JSON mode with tools of the client's own (the mode forces a tool).
pub(super) fn request(chat: &Chat, model: &str) -> Result<Value, BadField> {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let max = chat.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), json!(max));
    if !chat.system.is_empty() {
        body.insert("system".into(), json!(chat.system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages(&chat.turns)));
    if !chat.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(chat.stop));
    }
    for (key, v) in [("temperature", chat.temperature), ("top_p", chat.top_p)] {
        if let Some(v) = v {
            body.insert(key.into(), json!(v));
        }
    }
    if chat.stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(user) = &chat.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    if !chat.tools.is_empty() {
        let tools: Vec<Value> = chat
            .tools
            .iter()
            .map(|t| {
                let mut tool = json!({"name": t.name, "input_schema": t.parameters});
                if let Some(d) = &t.description {
                    tool["description"] = json!(d);
                }
                tool
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let choice = match &chat.tool_choice {
        None if chat.no_parallel_tools && !chat.tools.is_empty() => Some(json!({"type": "auto"})),
        None => None,
        Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
        Some(ToolChoice::None) => Some(json!({"type": "none"})),
        Some(ToolChoice::Required) => Some(json!({"type": "any"})),
        Some(ToolChoice::Function(name)) => Some(json!({"type": "tool", "name": name})),
    };
    if let Some(mut choice) = choice {
        if chat.no_parallel_tools && choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        body.insert("tool_choice".into(), choice);
    }
    if chat.json_mode {
        if !chat.tools.is_empty() {
            return Err(BadField::new(
                "response_format",
                "cannot be combined with `tools` when calling Anthropic models (JSON mode \
                 is a forced tool call there)",
            ));
        }
        let schema = chat
            .json_schema
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        body.insert(
            "tools".into(),
            json!([{"name": JSON_TOOL, "description": "Give the answer as this JSON document.",
                "input_schema": schema}]),
        );
        body.insert(
            "tool_choice".into(),
            json!({"type": "tool", "name": JSON_TOOL}),
        );
    }
    Ok(Value::Object(body))
}

/// The turns as Anthropic messages: tool results go in user messages, and
/// messages of the same role in a row become one.
fn messages(turns: &[Turn]) -> Vec<Value> {
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for turn in turns {
        let (role, blocks) = match turn {
            Turn::User(parts) => ("user", parts.iter().map(block).collect()),
            Turn::Assistant { text, tool_calls } => {
                let mut blocks: Vec<Value> = text
                    .iter()
                    .map(|t| json!({"type": "text", "text": t}))
                    .collect();
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
                }));
                ("assistant", blocks)
            }
            Turn::Tool { call_id, content } => (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": call_id, "content": content})],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, held)) if *last == role => held.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn block(part: &Part) -> Value {
    match part {
        Part::Text(t) => json!({"type": "text", "text": t}),
        Part::Inline { media_type, data } => json!({"type": "image", "source":
            {"type": "base64", "media_type": media_type, "data": data}}),
        Part::Url(url) => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

/// OpenAI's `finish_reason` for Anthropic's `stop_reason`.
fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        // end_turn, stop_sequence, pause_turn
        _ => "stop",
    }
}

/// A whole answer (or error) as OpenAI's.
pub(super) fn answer(status: StatusCode, body: &Bytes, model: &str) -> Answer {
    let read = match translate::read(WireFormat::Anthropic, "Anthropic", status, body) {
        Ok(read) => read,
        Err(unreadable) => return unreadable,
    };
    let json = &read.json;
    if !status.is_success() {
        let error = &json["error"];
        let message = error["message"]
            .as_str()
            .unwrap_or("Anthropic refused the request");
        return read.error(message, error["type"].as_str(), None);
    }
    let mut choice = Choice {
        finish_reason: finish_reason(json["stop_reason"].as_str().unwrap_or("end_turn")),
        ..Choice::default()
    };
    for b in json["content"].as_array().into_iter().flatten() {
        match b["type"].as_str() {
            Some("text") => {
                let text = choice.text.get_or_insert_with(String::new);
                text.push_str(b["text"].as_str().unwrap_or_default());
            }
            // JSON mode's forced call: its input is the answer.
            Some("tool_use") if b["name"] == JSON_TOOL => {
                let text = choice.text.get_or_insert_with(String::new);
                text.push_str(&b["input"].to_string());
                choice.finish_reason = "stop";
            }
            Some("tool_use") => choice.tool_calls.push(ToolCall {
                id: b["id"].as_str().unwrap_or_default().to_owned(),
                name: b["name"].as_str().unwrap_or_default().to_owned(),
                arguments: b["input"].clone(),
            }),
            _ => {}
        }
    }
    let id = json["id"].as_str().unwrap_or("chatcmpl-sluice");
    let model = json["model"].as_str().unwrap_or(model);
    read.completion(id, model, &[choice])
}

/// Reads Anthropic's stream events.
#[derive(Debug, Default)]
pub(super) struct Events {
    id: Option<String>,
    model: Option<String>,
    /// The content block index of each tool call, in order.
    tool_blocks: Vec<u64>,
    /// The content block of JSON mode's forced call, whose input is sent
    /// as text.
    json_block: Option<u64>,
}

impl Translator for Events {
    fn event(&mut self, data: &[u8], out: &mut Vec<(u32, Delta)>) {
        let Ok(e) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        match e["type"].as_str() {
            Some("message_start") => {
                self.id = e["message"]["id"].as_str().map(str::to_owned);
                self.model = e["message"]["model"].as_str().map(str::to_owned);
            }
            Some("content_block_start")
                if e["content_block"]["type"] == "tool_use"
                    && e["content_block"]["name"] == JSON_TOOL =>
            {
                self.json_block = e["index"].as_u64();
            }
            Some("content_block_start") if e["content_block"]["type"] == "tool_use" => {
                let block = &e["content_block"];
                self.tool_blocks
                    .push(e["index"].as_u64().unwrap_or_default());
                out.push((
                    0,
                    Delta::ToolStart {
                        index: self.tool_blocks.len() - 1,
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        arguments: String::new(),
                    },
                ));
            }
            Some("content_block_delta") => {
                let delta = &e["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        out.push((0, Delta::Text(text.to_owned())));
                    }
                    Some("input_json_delta") if e["index"].as_u64() == self.json_block => {
                        let text = delta["partial_json"].as_str().unwrap_or_default();
                        out.push((0, Delta::Text(text.to_owned())));
                    }
                    Some("input_json_delta") => {
                        let block = e["index"].as_u64().unwrap_or_default();
                        if let Some(index) = self.tool_blocks.iter().position(|b| *b == block) {
                            let arguments = delta["partial_json"].as_str().unwrap_or_default();
                            out.push((
                                0,
                                Delta::ToolArguments {
                                    index,
                                    arguments: arguments.to_owned(),
                                },
                            ));
                        }
                    }
                    // Thinking and its signature have no place in a chat chunk.
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(stop) = e["delta"]["stop_reason"].as_str() {
                    let finish = match finish_reason(stop) {
                        "tool_calls" if self.json_block.is_some() => "stop",
                        other => other,
                    };
                    out.push((0, Delta::Finish(finish)));
                }
            }
            Some("error") => {
                let error = &e["error"];
                out.push((
                    0,
                    Delta::Error {
                        message: error["message"]
                            .as_str()
                            .unwrap_or("upstream error")
                            .to_owned(),
                        code: error["type"].as_str().unwrap_or("api_error").to_owned(),
                    },
                ));
            }
            _ => {}
        }
    }

    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

#[cfg(test)]
mod tests;
