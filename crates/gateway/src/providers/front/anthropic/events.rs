//! An OpenAI chat stream rewritten, chunk by chunk, as Anthropic's event
//! sequence: `message_start`, then per content block
//! `content_block_start`, `content_block_delta`s and `content_block_stop`,
//! then `message_delta` (the stop reason and the usage) and
//! `message_stop`.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use sluice_usage::{Details, Endpoint, Usage, WireFormat};

use super::{stop_reason, usage_json};
use crate::providers::front::rewrite::Rewrite;

/// The block open in the Anthropic stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    /// A tool call, by its index among OpenAI's `tool_calls`.
    Tool(u64),
}

/// What the Anthropic stream has said so far.
#[derive(Default)]
pub(in crate::providers::front) struct Writer {
    model: String,
    started: bool,
    /// The open block and its index.
    open: Option<(usize, Open)>,
    /// The index of the next block.
    next: usize,
    /// Anthropic's stop reason, once the provider finished.
    stop: Option<&'static str>,
}

impl Writer {
    /// The writer of Anthropic's events for an answer of `model` (until the
    /// provider names its own).
    pub(in crate::providers::front) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            ..Self::default()
        }
    }

    fn start(&mut self, chunk: &Value, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let id = chunk["id"].as_str().unwrap_or("sluice");
        let model = chunk["model"].as_str().unwrap_or(&self.model);
        let message = json!({
            "id": format!("msg_{id}"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            // The provider reports its usage at the end: it goes out in
            // `message_delta`.
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        put(
            out,
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
    }

    /// Opens a block of `kind` (closing the one open), unless it is open.
    fn open(&mut self, kind: Open, block: Value, out: &mut BytesMut) -> usize {
        if let Some((index, open)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = Some((index, kind));
        let start = json!({"type": "content_block_start", "index": index, "content_block": block});
        put(out, "content_block_start", &start);
        index
    }

    fn close(&mut self, out: &mut BytesMut) {
        if let Some((index, _)) = self.open.take() {
            let stop = json!({"type": "content_block_stop", "index": index});
            put(out, "content_block_stop", &stop);
        }
    }
}

fn put(out: &mut BytesMut, event: &str, data: &Value) {
    out.put_slice(b"event: ");
    out.put_slice(event.as_bytes());
    out.put_slice(b"\ndata: ");
    out.put_slice(data.to_string().as_bytes());
    out.put_slice(b"\n\n");
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
            let message = error["message"].as_str().unwrap_or("the provider failed");
            let e = json!({"type": "error", "error": {"type": "api_error", "message": message}});
            put(out, "error", &e);
            return;
        }
        self.start(&chunk, out);
        // One choice: a Messages client never asks for more.
        let Some(choice) = chunk["choices"].get(0) else {
            return;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            let index = self.open(Open::Text, json!({"type": "text", "text": ""}), out);
            let d = json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": text}});
            put(out, "content_block_delta", &d);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let at = call["index"].as_u64().unwrap_or(0);
            let f = &call["function"];
            let index = if let Some(id) = call["id"].as_str() {
                let block = json!({"type": "tool_use", "id": id,
                    "name": f["name"].as_str().unwrap_or_default(), "input": {}});
                // A new call always opens its own block.
                self.close(out);
                self.open(Open::Tool(at), block, out)
            } else {
                match self.open {
                    Some((index, Open::Tool(_))) => index,
                    // Arguments for no call that was started.
                    _ => continue,
                }
            };
            if let Some(args) = f["arguments"].as_str().filter(|a| !a.is_empty()) {
                let d = json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": args}});
                put(out, "content_block_delta", &d);
            }
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            self.stop = Some(stop_reason(finish));
        }
    }

    fn end(&mut self, usage: Option<Usage>, details: Details, out: &mut BytesMut) {
        self.start(&Value::Null, out);
        self.close(out);
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": self.stop.unwrap_or("end_turn"), "stop_sequence": null},
            "usage": usage_json(usage, details.cached_tokens),
        });
        put(out, "message_delta", &delta);
        put(out, "message_stop", &json!({"type": "message_stop"}));
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        sluice_usage::error_event(WireFormat::Anthropic, Endpoint::Messages, code, message)
    }
}
