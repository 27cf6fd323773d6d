//! Gemini's stream, read event by event for translation into OpenAI
//! chat chunks.

use std::collections::HashMap;

use serde_json::Value;

use super::chat::{choices, finish_reason};
use crate::providers::translate::{Delta, Translator};

/// Reads Gemini's stream: each event a whole `GenerateContentResponse`
/// with the next piece of every candidate.
#[derive(Debug, Default)]
pub(super) struct Events {
    id: Option<String>,
    model: Option<String>,
    /// Tool calls so far, per choice.
    calls: HashMap<u32, usize>,
    /// Tool calls so far in all choices, for ids.
    all_calls: usize,
}

impl Translator for Events {
    fn event(&mut self, data: &[u8], out: &mut Vec<(u32, Delta)>) {
        let Ok(json) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(error) = json.get("error") {
            out.push((
                0,
                Delta::Error {
                    message: error["message"]
                        .as_str()
                        .unwrap_or("upstream error")
                        .to_owned(),
                    code: error["status"].as_str().unwrap_or("INTERNAL").to_owned(),
                },
            ));
            return;
        }
        if let Some(id) = json["responseId"].as_str() {
            self.id = Some(id.to_owned());
        }
        if let Some(model) = json["modelVersion"].as_str() {
            self.model = Some(model.to_owned());
        }
        let read = choices(&json);
        if read.is_empty() && json["promptFeedback"]["blockReason"].is_string() {
            out.push((0, Delta::Finish("content_filter")));
        }
        for (index, choice, reason) in read {
            if let Some(text) = choice.text.filter(|t| !t.is_empty()) {
                out.push((index, Delta::Text(text)));
            }
            let calls = self.calls.entry(index).or_default();
            for c in choice.tool_calls {
                let id = if c.id.is_empty() {
                    format!("call_{}", self.all_calls)
                } else {
                    c.id
                };
                out.push((
                    index,
                    Delta::ToolStart {
                        index: *calls,
                        id,
                        name: c.name,
                        arguments: c.arguments.to_string(),
                    },
                ));
                *calls += 1;
                self.all_calls += 1;
            }
            if let Some(reason) = reason {
                out.push((index, Delta::Finish(finish_reason(reason, *calls > 0))));
            }
        }
    }

    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}
