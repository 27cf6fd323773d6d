//! An Anthropic messages stream, event by event, assembled into the
//! `message` answer.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Applied, CaptureError, push_str};

#[derive(Debug, Default)]
pub(super) struct MessageAnswer {
    message: Option<Map<String, Value>>,
    /// Each block as it started, and its streamed text or JSON input.
    blocks: BTreeMap<u64, (Map<String, Value>, String)>,
    pub(super) stopped: bool,
}

impl MessageAnswer {
    pub(super) fn apply(&mut self, mut event: Value) -> Applied {
        match event.get("type")?.as_str()? {
            "message_start" => {
                self.message = Some(
                    event
                        .get_mut("message")?
                        .as_object_mut()
                        .map(std::mem::take)?,
                );
            }
            "content_block_start" => {
                let index = event.get("index")?.as_u64()?;
                let block = event
                    .get_mut("content_block")?
                    .as_object_mut()
                    .map(std::mem::take)?;
                self.blocks.insert(index, (block, String::new()));
            }
            "content_block_delta" => {
                let (block, streamed) = self.blocks.get_mut(&event.get("index")?.as_u64()?)?;
                let delta = event.get("delta")?;
                match delta.get("type")?.as_str()? {
                    "text_delta" => push_str(streamed, delta.get("text")),
                    "thinking_delta" => push_str(streamed, delta.get("thinking")),
                    "input_json_delta" => push_str(streamed, delta.get("partial_json")),
                    "signature_delta" => {
                        block.insert("signature".into(), delta.get("signature")?.clone());
                    }
                    "citations_delta" => {
                        let list = block.entry("citations").or_insert_with(|| json!([]));
                        list.as_array_mut()?.push(delta.get("citation")?.clone());
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                let message = self.message.as_mut()?;
                if let Some(delta) = event.get("delta").and_then(Value::as_object) {
                    message.extend(delta.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                if let Some(usage) = event.get("usage").and_then(Value::as_object) {
                    let into = message.entry("usage").or_insert_with(|| json!({}));
                    into.as_object_mut()?
                        .extend(usage.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            "message_stop" => self.stopped = true,
            "error" => return Some(Err(CaptureError::Failed)),
            _ => {}
        }
        Some(Ok(()))
    }

    pub(super) fn into_answer(self) -> Option<Value> {
        let mut message = self.message?;
        let mut content = Vec::with_capacity(self.blocks.len());
        for (mut block, streamed) in self.blocks.into_values() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => drop(block.insert("text".into(), json!(streamed))),
                Some("thinking") => drop(block.insert("thinking".into(), json!(streamed))),
                Some("tool_use" | "server_tool_use") if !streamed.is_empty() => {
                    let input: Value = serde_json::from_str(&streamed).ok()?;
                    block.insert("input".into(), input);
                }
                _ => {}
            }
            content.push(Value::Object(block));
        }
        message.insert("content".into(), Value::Array(content));
        Some(Value::Object(message))
    }
}
