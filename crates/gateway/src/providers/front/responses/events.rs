//! An OpenAI chat stream rewritten, chunk by chunk, as the Responses
//! events: `response.created`, `response.in_progress`, per output item
//! `response.output_item.added`, its deltas (`response.output_text.delta`
//! within a content part, `response.function_call_arguments.delta`) and
//! their `….done`s, `response.output_item.done`, then
//! `response.completed` with the whole response and its usage.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use sluice_usage::{Details, Endpoint, Usage, WireFormat};

use super::{call_item, message_item, response, usage_json};
use crate::providers::front::rewrite::Rewrite;

/// The output item being streamed.
enum Item {
    Text {
        id: String,
        text: String,
    },
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
}

#[derive(Default)]
pub(in crate::providers::front) struct Writer {
    model: String,
    id: Option<String>,
    seq: u64,
    open: Option<Item>,
    /// The finished items, for `response.completed`.
    done: Vec<Value>,
    finish: String,
}

impl Writer {
    /// The writer of Responses events for an answer of `model` (until the
    /// provider names its own).
    pub(in crate::providers::front) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            finish: "stop".into(),
            ..Self::default()
        }
    }

    fn put(&mut self, out: &mut BytesMut, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        out.put_slice(b"event: ");
        out.put_slice(kind.as_bytes());
        out.put_slice(b"\ndata: ");
        out.put_slice(data.to_string().as_bytes());
        out.put_slice(b"\n\n");
    }

    fn response_id(&self) -> String {
        format!("resp_{}", self.id.as_deref().unwrap_or("sluice"))
    }

    fn start(&mut self, chunk: &Value, out: &mut BytesMut) {
        if self.id.is_some() {
            return;
        }
        self.id = Some(chunk["id"].as_str().unwrap_or("sluice").to_owned());
        if let Some(m) = chunk["model"].as_str() {
            m.clone_into(&mut self.model);
        }
        let mut r = response(
            &self.response_id(),
            &self.model,
            Vec::new(),
            "stop",
            Value::Null,
        );
        r["status"] = json!("in_progress");
        self.put(out, "response.created", json!({"response": r}));
        self.put(out, "response.in_progress", json!({"response": r}));
    }

    /// Ends the open item with its `….done` events.
    fn close(&mut self, out: &mut BytesMut) {
        let at = self.done.len();
        let item = match self.open.take() {
            None => return,
            Some(Item::Text { id, text }) => {
                let base = json!({"item_id": id, "output_index": at, "content_index": 0});
                let mut done = base.clone();
                done["text"] = json!(text);
                self.put(out, "response.output_text.done", done);
                let mut part = base;
                part["part"] = json!({"type": "output_text", "text": text, "annotations": []});
                self.put(out, "response.content_part.done", part);
                message_item(&id, &text)
            }
            Some(Item::Call {
                call_id,
                name,
                arguments,
            }) => {
                let item = call_item(&call_id, &name, &arguments);
                let done =
                    json!({"item_id": item["id"], "output_index": at, "arguments": arguments});
                self.put(out, "response.function_call_arguments.done", done);
                item
            }
        };
        self.put(
            out,
            "response.output_item.done",
            json!({"output_index": at, "item": item}),
        );
        self.done.push(item);
    }
}

impl Rewrite for Writer {
    fn chunk(&mut self, data: &[u8], out: &mut BytesMut) {
        if data == b"[DONE]" {
            return;
        }
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            let e = json!({"code": error["code"], "message": error["message"], "param": null});
            self.put(out, "error", e);
            return;
        }
        self.start(&chunk, out);
        let Some(choice) = chunk["choices"].get(0) else {
            return;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            if !matches!(self.open, Some(Item::Text { .. })) {
                self.close(out);
                let at = self.done.len();
                let id = format!("msg_{}", self.id.as_deref().unwrap_or("sluice"));
                let item = json!({"type": "message", "id": id, "status": "in_progress",
                    "role": "assistant", "content": []});
                self.put(
                    out,
                    "response.output_item.added",
                    json!({"output_index": at, "item": item}),
                );
                let part = json!({"item_id": id, "output_index": at, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}});
                self.put(out, "response.content_part.added", part);
                self.open = Some(Item::Text {
                    id,
                    text: String::new(),
                });
            }
            let at = self.done.len();
            if let Some(Item::Text { id, text: all }) = &mut self.open {
                all.push_str(text);
                let d =
                    json!({"item_id": id, "output_index": at, "content_index": 0, "delta": text});
                self.put(out, "response.output_text.delta", d);
            }
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let f = &call["function"];
            if let Some(call_id) = call["id"].as_str() {
                self.close(out);
                let at = self.done.len();
                let name = f["name"].as_str().unwrap_or_default().to_owned();
                let item = json!({"type": "function_call", "id": format!("fc_{call_id}"),
                    "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"});
                self.put(
                    out,
                    "response.output_item.added",
                    json!({"output_index": at, "item": item}),
                );
                self.open = Some(Item::Call {
                    call_id: call_id.to_owned(),
                    name,
                    arguments: String::new(),
                });
            }
            let args = f["arguments"].as_str().unwrap_or_default();
            let at = self.done.len();
            if let (
                false,
                Some(Item::Call {
                    call_id, arguments, ..
                }),
            ) = (args.is_empty(), &mut self.open)
            {
                arguments.push_str(args);
                let d =
                    json!({"item_id": format!("fc_{call_id}"), "output_index": at, "delta": args});
                self.put(out, "response.function_call_arguments.delta", d);
            }
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            finish.clone_into(&mut self.finish);
        }
    }

    fn end(&mut self, usage: Option<Usage>, details: Details, out: &mut BytesMut) {
        self.start(&Value::Null, out);
        self.close(out);
        let usage = usage_json(usage, details);
        let output = std::mem::take(&mut self.done);
        let r = response(
            &self.response_id(),
            &self.model,
            output,
            &self.finish,
            usage,
        );
        let kind = if r["status"] == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.put(out, kind, json!({"response": r}));
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        sluice_usage::error_event(WireFormat::Openai, Endpoint::Responses, code, message)
    }
}
