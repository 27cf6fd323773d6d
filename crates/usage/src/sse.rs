//! An incremental parser of server-sent events, fed bytes as they arrive
//! and stopping at each event boundary, so the caller knows exactly which
//! input bytes belong to which event.
//!
//! It follows the event-stream grammar of the HTML standard: lines end in
//! `\r\n`, `\n` or `\r`; a blank line ends an event; `data` lines are joined
//! with `\n`; a colon and one optional space separate field and value;
//! lines starting with a colon are comments. Other fields (`event`, `id`,
//! `retry`) are not needed and are skipped.

/// What an event held when it was dispatched.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event<'a> {
    /// No `data` line (a blank line between events, a comment, an `event:`
    /// alone).
    Empty,
    /// The event's data, lines joined with `\n`.
    Data(&'a [u8]),
    /// Longer than the cap: neither its lines nor its data were kept.
    Oversized,
}

#[derive(Debug)]
pub(super) struct SseParser {
    /// Largest event, in raw bytes, whose data is kept.
    max_event_bytes: usize,
    /// The current line, before its terminator (not kept when oversized).
    line: Vec<u8>,
    /// Whether the current line has any byte (even if not kept).
    line_started: bool,
    /// The current event's data so far.
    data: Vec<u8>,
    /// Whether the current event has a `data` line (its data may be empty).
    has_data: bool,
    /// Raw bytes of the current event so far, terminators included.
    event_bytes: usize,
    /// Whether the current event went past `max_event_bytes`.
    oversized: bool,
    /// A line ended in `\r`; whether a `\n` follows, and so where the line
    /// ends, is known only at the next byte.
    pending_cr: bool,
    /// An event was dispatched and is cleared at the next call.
    dispatched: bool,
}

impl SseParser {
    pub(super) fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            line_started: false,
            data: Vec::new(),
            has_data: false,
            event_bytes: 0,
            oversized: false,
            pending_cr: false,
            dispatched: false,
        }
    }

    /// Parses `input` until it ends or an event is complete. Returns how
    /// many bytes it consumed and whether an event ended there; the event
    /// is then readable with [`SseParser::event`] until the next call.
    pub(super) fn advance(&mut self, input: &[u8]) -> (usize, bool) {
        if self.dispatched {
            self.clear_event();
        }
        let mut at = 0;
        loop {
            if self.pending_cr {
                let Some(&next) = input.get(at) else {
                    return (at, false);
                };
                self.pending_cr = false;
                if next == b'\n' {
                    at += 1;
                    self.event_bytes += 1;
                }
                if self.end_line() {
                    return (at, true);
                }
                continue;
            }
            let rest = &input[at..];
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.push_line(rest);
                return (input.len(), false);
            };
            self.push_line(&rest[..end]);
            at += end + 1;
            self.event_bytes += 1;
            if rest[end] == b'\r' {
                self.pending_cr = true;
            } else if self.end_line() {
                return (at, true);
            }
        }
    }

    /// The event that [`SseParser::advance`] just reported complete, or the
    /// unfinished one.
    pub(super) fn event(&self) -> Event<'_> {
        if self.oversized {
            Event::Oversized
        } else if self.has_data {
            Event::Data(&self.data)
        } else {
            Event::Empty
        }
    }

    /// Whether the current event went past the cap.
    pub(super) fn oversized(&self) -> bool {
        self.oversized
    }

    /// At the end of the stream: ends the last line as if it were
    /// terminated and reports whether the last event, finished or not, has
    /// data to look at (readable with [`SseParser::event`]). The parser
    /// starts afresh at the next call.
    pub(super) fn finish(&mut self) -> bool {
        if self.dispatched {
            self.clear_event();
        }
        if std::mem::take(&mut self.pending_cr) || self.line_started {
            self.end_line();
        }
        self.dispatched = true;
        matches!(self.event(), Event::Data(_))
    }

    fn push_line(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.line_started = true;
        self.event_bytes = self.event_bytes.saturating_add(bytes.len());
        if self.oversized {
            return;
        }
        if self.event_bytes > self.max_event_bytes {
            // Past the cap: drop what is held and only look for the end.
            self.oversized = true;
            self.line = Vec::new();
            self.data = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    /// Ends the current line; returns whether it was the blank line that
    /// ends an event.
    fn end_line(&mut self) -> bool {
        if !self.line_started {
            self.dispatched = true;
            return true;
        }
        self.line_started = false;
        if !self.oversized {
            let line = std::mem::take(&mut self.line);
            self.field(&line);
            // Keep the allocation for the next line.
            self.line = line;
            self.line.clear();
        }
        false
    }

    fn field(&mut self, line: &[u8]) {
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if name == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.event_bytes = 0;
        self.oversized = false;
        self.dispatched = false;
    }
}

/// The data of each server-sent event in a stream fed in chunks of any
/// size: what a translating reader needs to rewrite a stream event by
/// event. Events longer than `max_event_bytes` are skipped whole, so
/// memory stays bounded.
///
/// ```
/// use sluice_usage::SseEvents;
///
/// let mut events = SseEvents::new(1 << 20);
/// let mut seen = Vec::new();
/// events.feed(b"data: {\"a\"", |d| seen.push(d.to_vec()));
/// events.feed(b":1}\r\n\r\ndata: [DONE]", |d| seen.push(d.to_vec()));
/// events.finish(|d| seen.push(d.to_vec()));
/// assert_eq!(seen, [b"{\"a\":1}".to_vec(), b"[DONE]".to_vec()]);
/// ```
#[derive(Debug)]
pub struct SseEvents {
    parser: SseParser,
}

impl SseEvents {
    /// A reader that keeps events of up to `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            parser: SseParser::new(max_event_bytes),
        }
    }

    /// Reads `chunk`, calling `on_data` with the data of each event that
    /// ends in it.
    pub fn feed(&mut self, chunk: &[u8], mut on_data: impl FnMut(&[u8])) {
        let mut at = 0;
        while at < chunk.len() {
            let (consumed, ended) = self.parser.advance(&chunk[at..]);
            at += consumed;
            if !ended {
                break;
            }
            if let Event::Data(data) = self.parser.event() {
                on_data(data);
            }
        }
    }

    /// The stream ended: calls `on_data` with the last event if the stream
    /// stopped before its blank line.
    pub fn finish(&mut self, mut on_data: impl FnMut(&[u8])) {
        if self.parser.finish()
            && let Event::Data(data) = self.parser.event()
        {
            on_data(data);
        }
    }
}
