//! Gemini streams as a client asked for them: an OpenAI chat stream
//! rewritten chunk by chunk as `GenerateContentResponse` chunks
//! ([`Writer`]), and a Gemini SSE stream as a JSON array ([`to_array`]),
//! each a [`Rewrite`] of the shared stream reader.
//! Each goes out in the client's [`Form`].

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use sluice_usage::{DEFAULT_MAX_EVENT_BYTES, Details, Endpoint, SseEvents, Usage, WireFormat};

use super::{finish_reason, function_call, usage_metadata};
use crate::providers::StreamReader;
use crate::providers::front::rewrite::{Rewrite, Rewritten};

/// How a Gemini stream is written: server-sent events (`?alt=sse`) or
/// one JSON array whose elements come as they are made.
#[derive(Debug, Clone, Copy)]
pub(in crate::providers::front) struct Form {
    array: bool,
    /// Whether an element (or the array's `[`) went out.
    opened: bool,
}

impl Form {
    pub(in crate::providers::front) fn new(array: bool) -> Self {
        Self {
            array,
            opened: false,
        }
    }

    fn put(&mut self, out: &mut BytesMut, chunk: &[u8]) {
        if self.array {
            out.put_slice(if self.opened { b",\r\n" } else { b"[" });
            out.put_slice(chunk);
        } else {
            out.put_slice(b"data: ");
            out.put_slice(chunk);
            out.put_slice(b"\r\n\r\n");
        }
        self.opened = true;
    }

    fn end(&mut self, out: &mut BytesMut) {
        if self.array {
            if !self.opened {
                out.put_slice(b"[");
            }
            out.put_slice(b"]");
        }
    }
}

/// A Gemini SSE stream written as a JSON array: each event's data one
/// element.
pub(in crate::providers::front) fn to_array(sse: Box<dyn StreamReader>) -> Box<dyn StreamReader> {
    Box::new(Rewritten::new(sse, Form::new(true)))
}

impl Rewrite for Form {
    fn chunk(&mut self, data: &[u8], out: &mut BytesMut) {
        self.put(out, data);
    }

    fn end(&mut self, _usage: Option<Usage>, _details: Details, out: &mut BytesMut) {
        Form::end(self, out);
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        error_event(*self, code, message)
    }
}

/// A tool call being streamed: Gemini sends each call whole.
#[derive(Debug, Default)]
struct Pending {
    choice: u64,
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

pub(in crate::providers::front) struct Writer {
    form: Form,
    model: String,
    id: Option<String>,
    /// Tool calls whose arguments are still coming.
    calls: Vec<Pending>,
    /// Each finished choice's Gemini finish reason, sent at the end with
    /// the usage.
    finished: Vec<(u64, &'static str)>,
}

impl Writer {
    /// The writer of Gemini chunks for an answer of `model`, in the
    /// client's `form`.
    pub(in crate::providers::front) fn new(model: &str, form: Form) -> Self {
        Self {
            form,
            model: model.to_owned(),
            id: None,
            calls: Vec::new(),
            finished: Vec::new(),
        }
    }

    fn emit(&mut self, candidates: Vec<Value>, usage: Option<Value>, out: &mut BytesMut) {
        let mut chunk = json!({
            "candidates": candidates,
            "modelVersion": self.model,
            "responseId": self.id,
        });
        if let Some(u) = usage {
            chunk["usageMetadata"] = u;
        }
        self.form.put(out, chunk.to_string().as_bytes());
    }

    /// Sends choice `at`'s tool calls, each whole.
    fn calls_of(&mut self, at: u64, out: &mut BytesMut) {
        let parts: Vec<Value> = self
            .calls
            .iter()
            .filter(|p| p.choice == at)
            .map(|p| function_call(&p.id, &p.name, &p.arguments))
            .collect();
        self.calls.retain(|p| p.choice != at);
        if !parts.is_empty() {
            let c = json!({"content": {"role": "model", "parts": parts}, "index": at});
            self.emit(vec![c], None, out);
        }
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
            let message = error["message"].as_str().unwrap_or("the provider failed");
            let e = json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}});
            self.form.put(out, e.to_string().as_bytes());
            return;
        }
        if self.id.is_none() {
            self.id = chunk["id"].as_str().map(str::to_owned);
            if let Some(m) = chunk["model"].as_str() {
                m.clone_into(&mut self.model);
            }
        }
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let at = choice["index"].as_u64().unwrap_or(0);
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                let c =
                    json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": at});
                self.emit(vec![c], None, out);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().unwrap_or(0);
                let f = &call["function"];
                let pending = match self
                    .calls
                    .iter_mut()
                    .find(|p| p.choice == at && p.index == index)
                {
                    Some(p) => p,
                    None => {
                        self.calls.push(Pending {
                            choice: at,
                            index,
                            ..Pending::default()
                        });
                        self.calls.last_mut().expect("just pushed")
                    }
                };
                if let Some(id) = call["id"].as_str() {
                    id.clone_into(&mut pending.id);
                }
                if let Some(name) = f["name"].as_str() {
                    pending.name.push_str(name);
                }
                if let Some(args) = f["arguments"].as_str() {
                    pending.arguments.push_str(args);
                }
            }
            if let Some(finish) = choice["finish_reason"].as_str() {
                self.calls_of(at, out);
                self.finished.push((at, finish_reason(finish)));
            }
        }
    }

    fn end(&mut self, usage: Option<Usage>, details: Details, out: &mut BytesMut) {
        // Calls of a choice the provider never finished.
        let open: Vec<u64> = self.calls.iter().map(|p| p.choice).collect();
        for at in open {
            self.calls_of(at, out);
        }
        if self.finished.is_empty() {
            self.finished.push((0, "STOP"));
        }
        let last: Vec<Value> = self
            .finished
            .iter()
            .map(|(at, reason)| {
                json!({"content": {"role": "model", "parts": []}, "finishReason": reason, "index": at})
            })
            .collect();
        let usage = usage_metadata(usage, details.cached_tokens);
        self.emit(last, Some(usage), out);
        self.form.end(out);
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        error_event(self.form, code, message)
    }
}

/// The error that ends a Gemini client's stream, in its form.
fn error_event(form: Form, code: &str, message: &str) -> Bytes {
    let sse = sluice_usage::error_event(WireFormat::Gemini, Endpoint::Generate, code, message);
    if !form.array {
        return sse;
    }
    // The error's JSON, as the array's last element.
    let mut out = BytesMut::new();
    let mut form = form;
    let mut events = SseEvents::new(DEFAULT_MAX_EVENT_BYTES);
    events.feed(&sse, |d| form.put(&mut out, d));
    events.finish(|d| form.put(&mut out, d));
    form.end(&mut out);
    out.freeze()
}
