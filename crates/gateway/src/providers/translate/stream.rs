//! A streamed answer in another format, rewritten event by event into
//! OpenAI `chat.completion.chunk`s.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use sluice_usage::{
    self as usage, AnswerHead, DEFAULT_MAX_EVENT_BYTES, Endpoint, SseEvents, StreamScanner, Usage,
    WireFormat,
};

use super::{now, usage_json};
use crate::providers::StreamReader;

/// What one upstream event says, in OpenAI's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Delta {
    /// Text for the choice.
    Text(String),
    /// A tool call starts: its place among the choice's calls, id, name
    /// and the start of its arguments (a JSON text).
    ToolStart {
        index: usize,
        id: String,
        name: String,
        arguments: String,
    },
    /// More of a tool call's arguments.
    ToolArguments { index: usize, arguments: String },
    /// The choice is finished, for this OpenAI `finish_reason`.
    Finish(&'static str),
    /// The upstream reported an error in the stream.
    Error { message: String, code: String },
}

/// A format's reader of its own stream events.
pub(crate) trait Translator: Send {
    /// Reads one event's data; pushes `(choice, delta)` pairs.
    fn event(&mut self, data: &[u8], out: &mut Vec<(u32, Delta)>);
    /// The answer's id, once the stream has told it.
    fn id(&self) -> Option<&str>;
    /// The model that answers, once the stream has told it.
    fn model(&self) -> Option<&str>;
}

/// A stream in `format`, translated by `T` into OpenAI chunks. Usage and
/// tool calls are read by sluice-usage's scanner from the upstream
/// events themselves; the usage goes out in a last chunk when the client
/// asked for it (`stream_options.include_usage`), then `[DONE]`.
pub(crate) struct Translated<T> {
    events: SseEvents,
    scanner: StreamScanner,
    translator: T,
    include_usage: bool,
    /// The model the client asked for, until the stream names one.
    model: String,
    created: u64,
    /// Choices whose first chunk (with the role) has gone out.
    started: Vec<u32>,
    /// The finish reasons sent, in OpenAI's terms.
    finished: AnswerHead,
}

impl<T: Translator> Translated<T> {
    pub(crate) fn new(format: WireFormat, translator: T, include_usage: bool, model: &str) -> Self {
        Self {
            events: SseEvents::new(DEFAULT_MAX_EVENT_BYTES),
            scanner: StreamScanner::new(format, Endpoint::Chat, false),
            translator,
            include_usage,
            model: model.to_owned(),
            created: now(),
            started: Vec::new(),
            finished: AnswerHead::default(),
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        let mut c = json!({
            "id": self.translator.id().unwrap_or("chatcmpl-sluice"),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.translator.model().unwrap_or(&self.model),
            "choices": choices,
        });
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }

    fn write(&mut self, deltas: Vec<(u32, Delta)>, out: &mut BytesMut) {
        for (choice, delta) in deltas {
            let (delta, finish) = match delta {
                Delta::Error { message, code } => {
                    let e = json!({"error": {"message": message, "type": "server_error", "code": code, "param": null}});
                    put_event(out, &e);
                    continue;
                }
                Delta::Text(text) => (json!({"content": text}), Value::Null),
                Delta::ToolStart {
                    index,
                    id,
                    name,
                    arguments,
                } => (
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}}]}),
                    Value::Null,
                ),
                Delta::ToolArguments { index, arguments } => (
                    json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
                    Value::Null,
                ),
                Delta::Finish(reason) => {
                    self.finished.learn(None, None, Some(reason.to_owned()));
                    (json!({}), json!(reason))
                }
            };
            if !self.started.contains(&choice) {
                self.started.push(choice);
                let first = json!({"role": "assistant", "content": ""});
                let c = self.chunk(choice_json(choice, first, Value::Null));
                put_event(out, &c);
            }
            let c = self.chunk(choice_json(choice, delta, finish));
            put_event(out, &c);
        }
    }
}

fn choice_json(index: u32, delta: Value, finish: Value) -> Value {
    json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}])
}

fn put_event(out: &mut BytesMut, data: &Value) {
    out.put_slice(b"data: ");
    out.put_slice(data.to_string().as_bytes());
    out.put_slice(b"\n\n");
}

impl<T: Translator> StreamReader for Translated<T> {
    fn feed(&mut self, chunk: Bytes) -> Bytes {
        // Not stripping: the scanner hands the chunk back untouched.
        let _ = self.scanner.feed(chunk.clone());
        let mut deltas = Vec::new();
        let translator = &mut self.translator;
        self.events
            .feed(&chunk, |data| translator.event(data, &mut deltas));
        let mut out = BytesMut::new();
        self.write(deltas, &mut out);
        out.freeze()
    }

    fn finish(&mut self) -> Bytes {
        let _ = self.scanner.finish();
        let mut deltas = Vec::new();
        let translator = &mut self.translator;
        self.events
            .finish(|data| translator.event(data, &mut deltas));
        let mut out = BytesMut::new();
        self.write(deltas, &mut out);
        if self.include_usage
            && let Some(u) = self.scanner.usage()
        {
            let mut last = self.chunk(json!([]));
            last["usage"] = usage_json(u);
            put_event(&mut out, &last);
        }
        out.put_slice(b"data: [DONE]\n\n");
        out.freeze()
    }

    fn usage(&self) -> Option<Usage> {
        self.scanner.usage()
    }

    fn details(&self) -> sluice_usage::Details {
        self.scanner.details()
    }

    fn tool_calls(&self) -> u32 {
        self.scanner.tool_calls()
    }

    fn head(&self) -> AnswerHead {
        AnswerHead {
            id: self.translator.id().map(str::to_owned),
            model: self.translator.model().map(str::to_owned),
            finish_reasons: self.finished.finish_reasons.clone(),
        }
    }

    fn used_so_far(&self, prompt_estimate: u64, chars_per_token: u64) -> Option<Usage> {
        Some(self.scanner.used_so_far(prompt_estimate, chars_per_token))
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        usage::error_event(WireFormat::Openai, Endpoint::Chat, code, message)
    }
}

/// Test help: feeds `stream` to `reader` `size` bytes at a time and returns
/// the chunks it wrote, checking that they end with `[DONE]`.
#[cfg(test)]
pub(crate) fn run(reader: &mut dyn StreamReader, stream: &str, size: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for piece in stream.as_bytes().chunks(size) {
        out.extend_from_slice(&reader.feed(Bytes::copy_from_slice(piece)));
    }
    out.extend_from_slice(&reader.finish());
    let text = String::from_utf8(out).expect("UTF-8");
    let data: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect("data events only"))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("JSON chunks"))
        .collect()
}
