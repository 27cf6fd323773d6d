//! Reading the usage out of a streamed (SSE) response while it passes
//! through to the client, chunk by chunk.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use super::sse::{Event, SseParser};
use super::wire::{self, CacheTokens, RawUsage};
use super::{Dialect, Endpoint, Usage};
use crate::WireFormat;

/// The largest single event [`StreamScanner`] holds and scans by default:
/// 1 MiB. Usage events are a few hundred bytes; a `/responses`
/// `response.completed` event repeats the whole output and can be large.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// Watches a streamed model response on its way to the client: it records
/// the usage the provider reports (OpenAI's final usage chunk, Anthropic's
/// `message_start` and `message_delta`, `/responses`' `response.completed`,
/// Gemini's `usageMetadata` in its chunks)
/// and the tool calls the model makes, and can remove OpenAI's usage-only
/// chunk that the gateway asked for on the client's behalf.
///
/// The bytes it returns are the bytes it was given, never re-encoded.
/// Without stripping each chunk is returned as it came, at once, and only a
/// copy of an unfinished event is kept for scanning. With stripping (OpenAI
/// chat streams only; ignored for other formats and endpoints) a chunk is
/// returned up to the end of its last complete event and the unfinished
/// event is held until its blank line arrives, so the client still gets
/// every event as soon as it is complete. An event ended by a lone `\r` is
/// held until the next byte shows whether a `\n` follows.
///
/// Memory is bounded: an event longer than the cap (see
/// [`StreamScanner::with_max_event_bytes`]) is forwarded as it arrives and
/// not scanned, so usage in such an event is missed. Events whose data is
/// not JSON, or not of the expected shape, are forwarded and ignored.
#[derive(Debug)]
pub struct StreamScanner {
    parser: SseParser,
    tally: Tally,
    strip: bool,
    /// When stripping: the raw bytes of the unfinished event, not yet sent.
    held: BytesMut,
}

impl StreamScanner {
    /// A scanner for one response stream. `strip_usage_chunk` removes the
    /// OpenAI chat usage-only chunk (`choices: []`, `usage` set); pass the
    /// negation of what [`super::request_usage_in_stream`] returned.
    pub fn new(format: WireFormat, endpoint: Endpoint, strip_usage_chunk: bool) -> Self {
        Self::of(format.dialect(), endpoint, strip_usage_chunk)
    }

    /// [`StreamScanner::new`] for a stream in `dialect`.
    pub fn of(dialect: &'static dyn Dialect, endpoint: Endpoint, strip_usage_chunk: bool) -> Self {
        Self {
            parser: SseParser::new(DEFAULT_MAX_EVENT_BYTES),
            tally: Tally {
                dialect,
                endpoint,
                prompt: None,
                completion: None,
                total: None,
                cached: None,
                reasoning: None,
                tool_calls: 0,
                output_chars: 0,
                head: AnswerHead::default(),
            },
            strip: strip_usage_chunk && dialect.has_usage_chunk(endpoint),
            held: BytesMut::new(),
        }
    }

    /// Sets the largest event, in bytes, that is held and scanned (default
    /// [`DEFAULT_MAX_EVENT_BYTES`]). Call it before the first chunk.
    #[must_use]
    pub fn with_max_event_bytes(mut self, max_event_bytes: usize) -> Self {
        self.parser = SseParser::new(max_event_bytes);
        self
    }

    /// Scans the next chunk of the stream and returns the bytes to send to
    /// the client now.
    #[must_use = "the returned bytes are what the client must receive"]
    pub fn feed(&mut self, chunk: Bytes) -> Bytes {
        if !self.strip {
            scan(&mut self.parser, &mut self.tally, false, &chunk, |_, _| {});
            return chunk;
        }
        let mut out = Output::new(&chunk);
        let held = &mut self.held;
        let (parser, tally) = (&mut self.parser, &mut self.tally);
        let end = scan(parser, tally, true, &chunk, |event, drop| {
            if drop {
                held.clear();
            } else {
                out.push_held(held);
                out.push(event);
            }
        });
        if self.parser.oversized() {
            // Too big to hold: what there is of it goes out as it comes.
            out.push_held(held);
            out.push(end..chunk.len());
        } else {
            held.extend_from_slice(&chunk[end..]);
        }
        out.into_bytes()
    }

    /// Ends the stream: returns any bytes still held (an event the stream
    /// did not finish) and scans that event too, in case it carries usage.
    #[must_use = "the returned bytes are what the client must receive"]
    pub fn finish(&mut self) -> Bytes {
        if let Some(data) = self.parser.finish() {
            self.tally.on_event(data);
        }
        self.held.split().freeze()
    }

    /// The usage reported so far, if any.
    pub fn usage(&self) -> Option<Usage> {
        wire::assemble(self.tally.prompt, self.tally.completion, self.tally.total)
    }

    /// The cached input and reasoning output reported so far, as
    /// [`crate::details`] reads them from a whole answer: OpenAI's final
    /// usage chunk (`prompt_tokens_details.cached_tokens`,
    /// `completion_tokens_details.reasoning_tokens`), `/responses`'
    /// `response.completed`, Anthropic's `cache_read_input_tokens` in
    /// `message_start`, Gemini's last `usageMetadata`
    /// (`cachedContentTokenCount`, `thoughtsTokenCount`).
    pub fn details(&self) -> crate::Details {
        crate::Details::of(self.tally.cached, self.tally.reasoning)
    }

    /// How many tool calls the model has started so far: OpenAI tool-call
    /// deltas that carry an `id`, Anthropic `tool_use` blocks, `/responses`
    /// `function_call` output items, Gemini `functionCall` parts.
    pub fn tool_calls(&self) -> u32 {
        self.tally.tool_calls
    }

    /// What the stream said of its answer so far: id, model and finish
    /// reasons (OpenAI chat chunks, Anthropic `message_start` and
    /// `message_delta`).
    pub fn head(&self) -> &AnswerHead {
        &self.tally.head
    }

    /// The characters of output streamed so far: text, reasoning, refusals
    /// and tool-call arguments (OpenAI chat deltas, Anthropic
    /// `content_block_delta`s, `/responses` `*.delta` events).
    pub fn output_chars(&self) -> u64 {
        self.tally.output_chars
    }

    /// What the stream has used so far, for a stream cut before its end
    /// (the provider's final usage never came): the usage it reported,
    /// its input completed by `prompt_estimate` when it reported none and
    /// its output by the text streamed ([`StreamScanner::output_chars`]
    /// over `chars_per_token`, rounded up) when that is more. Settling
    /// this instead of keeping the whole reservation charges a cut stream
    /// for what it used, not for its `max_tokens`.
    pub fn used_so_far(&self, prompt_estimate: u64, chars_per_token: u64) -> Usage {
        let t = &self.tally;
        let prompt_tokens = t.prompt.unwrap_or(prompt_estimate);
        let streamed = t.output_chars.div_ceil(chars_per_token.max(1));
        let completion_tokens = t.completion.unwrap_or(0).max(streamed);
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
        }
    }
}

/// Parses `chunk`, calling `on_event` with the byte range of each event that
/// ends in it (counted from the end of the previous one) and whether to drop
/// it. Returns where the last complete event ended.
fn scan(
    parser: &mut SseParser,
    tally: &mut Tally,
    strip: bool,
    chunk: &[u8],
    mut on_event: impl FnMut(Range<usize>, bool),
) -> usize {
    let (mut at, mut from) = (0, 0);
    while at < chunk.len() {
        let (consumed, event) = parser.advance(&chunk[at..]);
        at += consumed;
        let usage_only = match event {
            Some(Event::Data(data)) => tally.on_event(data),
            Some(Event::Empty | Event::Oversized) => false,
            None => break,
        };
        on_event(from..at, usage_only && strip);
        from = at;
    }
    from
}

/// What a streamed answer says of itself, as the OpenTelemetry GenAI
/// conventions' `gen_ai.response.id`, `.model` and `.finish_reasons`
/// name it: the first id and model the stream gives, every choice's
/// finish reason in the order they came.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerHead {
    /// The answer's id (`chatcmpl-…`, `msg_…`).
    pub id: Option<String>,
    /// The model that answered, as the provider names it.
    pub model: Option<String>,
    /// Why each choice ended (`stop`, `length`, `end_turn`, …).
    pub finish_reasons: Vec<String>,
}

impl AnswerHead {
    /// Keeps the first `id` and `model` told, adds a finish `reason`.
    pub fn learn(&mut self, id: Option<String>, model: Option<String>, reason: Option<String>) {
        if self.id.is_none() {
            self.id = id;
        }
        if self.model.is_none() {
            self.model = model;
        }
        // Bounded: a hostile stream cannot grow it past the choices a
        // request may ask for.
        if let Some(r) = reason
            && self.finish_reasons.len() < crate::MAX_CHOICES as usize
        {
            self.finish_reasons.push(r);
        }
    }
}

/// What has been learnt from a stream's events so far: its dialect's
/// [`Dialect::scan_event`] records each event here. Public only to be
/// named in that trait; nothing outside the crate can make or read one.
#[derive(Debug)]
pub struct Tally {
    dialect: &'static dyn Dialect,
    endpoint: Endpoint,
    pub(crate) prompt: Option<u64>,
    pub(crate) completion: Option<u64>,
    pub(crate) total: Option<u64>,
    pub(crate) cached: Option<u64>,
    pub(crate) reasoning: Option<u64>,
    pub(crate) tool_calls: u32,
    output_chars: u64,
    pub(crate) head: AnswerHead,
}

impl Tally {
    /// Records what one event's data says; returns whether it is OpenAI's
    /// usage-only chat chunk.
    fn on_event(&mut self, data: &[u8]) -> bool {
        if data == b"[DONE]" {
            return false;
        }
        self.dialect.scan_event(self.endpoint, self, data)
    }

    /// Later reports replace earlier ones, field by field: providers send
    /// cumulative counts.
    pub(crate) fn merge(&mut self, usage: &RawUsage, cache: CacheTokens) {
        self.prompt = usage.prompt(cache).or(self.prompt);
        self.completion = usage.completion().or(self.completion);
        self.total = usage.total().or(self.total);
        self.cached = usage.cached(cache).or(self.cached);
        self.reasoning = usage.reasoning().or(self.reasoning);
    }

    pub(crate) fn add_chars(&mut self, n: u64) {
        self.output_chars = self.output_chars.saturating_add(n);
    }

    pub(crate) fn add_tool_calls(&mut self, n: usize) {
        self.tool_calls = self.tool_calls.saturating_add(wire::saturate(n));
    }
}

/// The bytes of one chunk to send: slices of the chunk itself while they
/// are contiguous (no copy), else a buffer.
#[derive(Debug)]
struct Output<'a> {
    chunk: &'a Bytes,
    range: Option<Range<usize>>,
    buf: BytesMut,
}

impl<'a> Output<'a> {
    fn new(chunk: &'a Bytes) -> Self {
        Self {
            chunk,
            range: None,
            buf: BytesMut::new(),
        }
    }

    /// Sends the held start of the event first; `held` is left empty.
    fn push_held(&mut self, held: &mut BytesMut) {
        if held.is_empty() {
            return;
        }
        self.spill();
        if self.buf.is_empty() {
            self.buf = held.split();
        } else {
            self.buf.extend_from_slice(held);
            held.clear();
        }
    }

    fn push(&mut self, bytes: Range<usize>) {
        if bytes.is_empty() {
            return;
        }
        match &mut self.range {
            Some(range) if self.buf.is_empty() && range.end == bytes.start => range.end = bytes.end,
            None if self.buf.is_empty() => self.range = Some(bytes),
            _ => {
                self.spill();
                self.buf.extend_from_slice(&self.chunk[bytes]);
            }
        }
    }

    fn spill(&mut self) {
        if let Some(range) = self.range.take() {
            self.buf.extend_from_slice(&self.chunk[range]);
        }
    }

    fn into_bytes(mut self) -> Bytes {
        if self.buf.is_empty() {
            return self.range.map_or_else(Bytes::new, |r| self.chunk.slice(r));
        }
        self.spill();
        self.buf.freeze()
    }
}

pub(crate) mod chat;
pub(crate) mod failure;
pub(crate) mod lean;
#[cfg(test)]
mod tests;

pub use failure::error_event;
