//! The one stream reader of every client format in front of an OpenAI
//! chat adapter (Anthropic Messages, Gemini, Responses, legacy
//! completions), and of a Gemini stream written as a JSON array: the
//! inner adapter's stream (OpenAI chat chunks, or Gemini's own events;
//! its usage read from the provider's own events) cut into events, each
//! handed to the client format's [`Rewrite`], which writes its own.
//! Usage, tool calls and what a stream used so far are the inner
//! adapter's: a client format changes how the answer looks, never what
//! it is charged.

use bytes::{Bytes, BytesMut};
use sluice_usage::{AnswerHead, DEFAULT_MAX_EVENT_BYTES, Details, SseEvents, Usage};

use crate::providers::StreamReader;

/// Room for what a client format writes beyond the length of the chunks
/// (an Anthropic `message_start` with its first block).
const START_BYTES: usize = 512;

/// What a client format writes from the inner stream's events.
pub(in crate::providers::front) trait Rewrite: Send {
    /// One event's data (a chat chunk, or `[DONE]`; a Gemini chunk).
    fn chunk(&mut self, data: &[u8], out: &mut BytesMut);
    /// The stream ended: what closes it, with the provider's usage.
    fn end(&mut self, usage: Option<Usage>, details: Details, out: &mut BytesMut);
    /// The event that ends a stream the gateway cannot finish.
    fn error_event(&self, code: &str, message: &str) -> Bytes;
}

/// An inner stream rewritten by `W` (see the module doc).
pub(in crate::providers::front) struct Rewritten<W> {
    inner: Box<dyn StreamReader>,
    events: SseEvents,
    writer: W,
}

impl<W: Rewrite> Rewritten<W> {
    pub(in crate::providers::front) fn new(inner: Box<dyn StreamReader>, writer: W) -> Self {
        Self {
            inner,
            events: SseEvents::new(DEFAULT_MAX_EVENT_BYTES),
            writer,
        }
    }
}

impl<W: Rewrite> StreamReader for Rewritten<W> {
    fn feed(&mut self, chunk: Bytes) -> Bytes {
        let openai = self.inner.feed(chunk);
        if openai.is_empty() {
            return Bytes::new();
        }
        // One allocation: a client format's events are about as long as
        // the chunks they are written from (the first one longer).
        let mut out = BytesMut::with_capacity(openai.len() + START_BYTES);
        let writer = &mut self.writer;
        self.events.feed(&openai, |d| writer.chunk(d, &mut out));
        out.freeze()
    }

    fn finish(&mut self) -> Bytes {
        let openai = self.inner.finish();
        let mut out = BytesMut::new();
        let writer = &mut self.writer;
        self.events.feed(&openai, |d| writer.chunk(d, &mut out));
        self.events.finish(|d| writer.chunk(d, &mut out));
        writer.end(self.inner.usage(), self.inner.details(), &mut out);
        out.freeze()
    }

    fn usage(&self) -> Option<Usage> {
        self.inner.usage()
    }

    fn details(&self) -> Details {
        self.inner.details()
    }

    fn tool_calls(&self) -> u32 {
        self.inner.tool_calls()
    }

    fn head(&self) -> AnswerHead {
        self.inner.head()
    }

    fn used_so_far(&self, prompt_estimate: u64, chars_per_token: u64) -> Option<Usage> {
        self.inner.used_so_far(prompt_estimate, chars_per_token)
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        self.writer.error_event(code, message)
    }
}
