//! An OpenAI chat stream rewritten, chunk by chunk, as Anthropic's event
//! sequence: `message_start`, then per content block
//! `content_block_start`, `content_block_delta`s and `content_block_stop`,
//! then `message_delta` (the stop reason and the usage) and
//! `message_stop`.

use bytes::{BufMut, Bytes, BytesMut};
use sluice_usage::{Details, Endpoint, Usage, WireFormat};

use super::{put_contents, put_index, put_json, put_str, stop_reason, usage_json};
use crate::providers::front::chat::{self, Chunk, Read};
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

/// A block as it opens.
enum Block<'a> {
    Text,
    ToolUse { id: &'a str, name: &'a str },
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

    fn start(&mut self, chunk: Option<&Chunk<'_>>, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let id = chunk.and_then(|c| c.id.as_deref()).unwrap_or("sluice");
        let model = chunk
            .and_then(|c| c.model.as_deref())
            .unwrap_or(&self.model);
        put_head(out, "message_start");
        out.put_slice(br#"{"type":"message_start","message":{"id":"msg_"#);
        put_contents(out, id);
        out.put_slice(br#"","type":"message","role":"assistant","model":"#);
        put_str(out, model);
        // The provider reports its usage at the end: it goes out in
        // `message_delta`.
        out.put_slice(br#","content":[],"stop_reason":null,"stop_sequence":null,"#);
        out.put_slice(br#""usage":{"input_tokens":0,"output_tokens":0}}}"#);
        put_tail(out);
    }

    /// Opens a block of `kind` (closing the one open), unless it is open.
    fn open(&mut self, kind: Open, block: Block<'_>, out: &mut BytesMut) -> usize {
        if let Some((index, open)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = Some((index, kind));
        put_head(out, "content_block_start");
        out.put_slice(br#"{"type":"content_block_start","index":"#);
        put_index(out, index);
        match block {
            Block::Text => out.put_slice(br#","content_block":{"type":"text","text":""}}"#),
            Block::ToolUse { id, name } => {
                out.put_slice(br#","content_block":{"type":"tool_use","id":"#);
                put_str(out, id);
                out.put_slice(br#","name":"#);
                put_str(out, name);
                out.put_slice(br#","input":{}}}"#);
            }
        }
        put_tail(out);
        index
    }

    fn close(&mut self, out: &mut BytesMut) {
        if let Some((index, _)) = self.open.take() {
            put_head(out, "content_block_stop");
            out.put_slice(br#"{"type":"content_block_stop","index":"#);
            put_index(out, index);
            out.put_slice(b"}");
            put_tail(out);
        }
    }
}

// Each event is written straight into the output, its fields in
// Anthropic's order: no tree, and no serializer writing a few bytes at a
// time.

fn put_head(out: &mut BytesMut, event: &str) {
    out.put_slice(b"event: ");
    out.put_slice(event.as_bytes());
    out.put_slice(b"\ndata: ");
}

fn put_tail(out: &mut BytesMut) {
    out.put_slice(b"\n\n");
}

/// A `content_block_delta` of block `index`: `text` as the delta's
/// `field`, of type `kind`.
fn put_delta(out: &mut BytesMut, index: usize, kind: &str, field: &str, text: &str) {
    put_head(out, "content_block_delta");
    out.put_slice(br#"{"type":"content_block_delta","index":"#);
    put_index(out, index);
    out.put_slice(br#","delta":{"type":""#);
    out.put_slice(kind.as_bytes());
    out.put_slice(br#"",""#);
    out.put_slice(field.as_bytes());
    out.put_slice(br#"":"#);
    put_str(out, text);
    out.put_slice(b"}}");
    put_tail(out);
}

impl Rewrite for Writer {
    fn chunk(&mut self, data: &[u8], out: &mut BytesMut) {
        if data == b"[DONE]" {
            return;
        }
        let chunk = match chat::read(data) {
            None => return,
            Some(Read::Error(error)) => {
                let message = error["message"].as_str().unwrap_or("the provider failed");
                put_head(out, "error");
                out.put_slice(br#"{"type":"error","error":{"type":"api_error","message":"#);
                put_str(out, message);
                out.put_slice(b"}}");
                put_tail(out);
                return;
            }
            Some(Read::Chunk(chunk)) => chunk,
        };
        self.start(Some(&chunk), out);
        // One choice: a Messages client never asks for more.
        let Some(choice) = chunk.choices.first() else {
            return;
        };
        if let Some(text) = choice.text() {
            let index = self.open(Open::Text, Block::Text, out);
            put_delta(out, index, "text_delta", "text", text);
        }
        for call in choice.tool_calls() {
            let at = call.index.unwrap_or(0);
            let index = if let Some(id) = call.id.as_deref() {
                let block = Block::ToolUse {
                    id,
                    name: call.name().unwrap_or_default(),
                };
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
            if let Some(args) = call.arguments().filter(|a| !a.is_empty()) {
                put_delta(out, index, "input_json_delta", "partial_json", args);
            }
        }
        if let Some(finish) = choice.finish() {
            self.stop = Some(stop_reason(finish));
        }
    }

    fn end(&mut self, usage: Option<Usage>, details: Details, out: &mut BytesMut) {
        self.start(None, out);
        self.close(out);
        put_head(out, "message_delta");
        out.put_slice(br#"{"type":"message_delta","delta":{"stop_reason":""#);
        out.put_slice(self.stop.unwrap_or("end_turn").as_bytes());
        out.put_slice(br#"","stop_sequence":null},"usage":"#);
        put_json(out, &usage_json(usage, details.cached_tokens));
        out.put_slice(b"}");
        put_tail(out);
        put_head(out, "message_stop");
        out.put_slice(br#"{"type":"message_stop"}"#);
        put_tail(out);
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        sluice_usage::error_event(WireFormat::Anthropic, Endpoint::Messages, code, message)
    }
}
