//! An OpenAI chat completion stream, chunk by chunk, assembled into the
//! `chat.completion` answer.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Applied, CaptureError, append, push_str};

#[derive(Debug, Default)]
pub(super) struct ChatAnswer {
    base: Map<String, Value>,
    choices: BTreeMap<u64, ChatChoice>,
    usage: Option<Value>,
    pub(super) done: bool,
}

#[derive(Debug, Default)]
struct ChatChoice {
    role: Option<Value>,
    content: Option<String>,
    refusal: Option<String>,
    function_call: Option<(String, String)>,
    tool_calls: BTreeMap<u64, (Map<String, Value>, String, String)>,
    finish_reason: Option<Value>,
}

impl ChatAnswer {
    pub(super) fn apply(&mut self, chunk: Value) -> Applied {
        if chunk.get("error").is_some() {
            return Some(Err(CaptureError::Failed));
        }
        for field in [
            "id",
            "created",
            "model",
            "system_fingerprint",
            "service_tier",
        ] {
            if let Some(v) = chunk.get(field).filter(|v| !v.is_null()) {
                self.base.entry(field).or_insert_with(|| v.clone());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage.clone());
        }
        for c in chunk.get("choices")?.as_array()? {
            let choice = self.choices.entry(c.get("index")?.as_u64()?).or_default();
            if let Some(finish) = c.get("finish_reason").filter(|f| !f.is_null()) {
                choice.finish_reason = Some(finish.clone());
            }
            let Some(delta) = c.get("delta") else {
                continue;
            };
            if let Some(role) = delta.get("role").filter(|r| !r.is_null()) {
                choice.role = Some(role.clone());
            }
            append(&mut choice.content, delta.get("content"));
            append(&mut choice.refusal, delta.get("refusal"));
            if let Some(call) = delta.get("function_call") {
                let (name, args) = choice.function_call.get_or_insert_default();
                push_str(name, call.get("name"));
                push_str(args, call.get("arguments"));
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let slot = choice
                    .tool_calls
                    .entry(call.get("index")?.as_u64()?)
                    .or_default();
                for field in ["id", "type"] {
                    if let Some(v) = call.get(field).filter(|v| !v.is_null()) {
                        slot.0.insert(field.to_owned(), v.clone());
                    }
                }
                let function = call.get("function");
                push_str(&mut slot.1, function.and_then(|f| f.get("name")));
                push_str(&mut slot.2, function.and_then(|f| f.get("arguments")));
            }
        }
        Some(Ok(()))
    }

    pub(super) fn into_answer(self) -> Option<Value> {
        let mut choices = Vec::with_capacity(self.choices.len());
        for (index, c) in self.choices {
            // A choice without its finish reason was cut off.
            let finish_reason = c.finish_reason?;
            let mut message = Map::new();
            message.insert("role".into(), c.role.unwrap_or(json!("assistant")));
            message.insert(
                "content".into(),
                c.content.map_or(Value::Null, Value::String),
            );
            if let Some(refusal) = c.refusal {
                message.insert("refusal".into(), json!(refusal));
            }
            if let Some((name, arguments)) = c.function_call {
                message.insert(
                    "function_call".into(),
                    json!({"name": name, "arguments": arguments}),
                );
            }
            if !c.tool_calls.is_empty() {
                let calls: Vec<Value> = c
                    .tool_calls
                    .into_values()
                    .map(|(mut call, name, arguments)| {
                        call.insert(
                            "function".into(),
                            json!({"name": name, "arguments": arguments}),
                        );
                        Value::Object(call)
                    })
                    .collect();
                message.insert("tool_calls".into(), Value::Array(calls));
            }
            choices.push(json!({"index": index, "message": message, "logprobs": null, "finish_reason": finish_reason}));
        }
        let mut answer = self.base;
        answer.insert("object".into(), json!("chat.completion"));
        answer.insert("choices".into(), Value::Array(choices));
        if let Some(usage) = self.usage {
            answer.insert("usage".into(), usage);
        }
        Some(Value::Object(answer))
    }
}
