//! An incremental parser of server-sent events, fed bytes as they arrive
//! and stopping at each event boundary, so the caller knows exactly which
//! input bytes belong to which event.
//!
//! It follows the event-stream grammar of the HTML standard: lines end in
//! `\r\n`, `\n` or `\r`; a blank line ends an event; `data` lines are joined
//! with `\n`; a colon and one optional space separate field and value;
//! lines starting with a colon are comments. Other fields (`event`, `id`,
//! `retry`) are not needed and are skipped.

use std::ops::Range;

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
    /// The start of a line that an earlier input ended in the middle of
    /// (not kept when oversized). A line wholly inside one input is read
    /// where it lies.
    line: Vec<u8>,
    /// Whether the current line has any byte (even if not kept).
    line_started: bool,
    /// Where the current event's data is: none yet, in the input of this
    /// call (one `data` line, the common case: not copied), or in `data`.
    data_at: DataAt,
    /// The current event's data, when it spans inputs or lines.
    data: Vec<u8>,
    /// Raw bytes of the current event so far, terminators included.
    event_bytes: usize,
    /// Whether the current event went past `max_event_bytes`.
    oversized: bool,
    /// A line ended in `\r` (`Some(blank)`: whether the line was blank);
    /// whether a `\n` follows, and so where the line ends, is known only at
    /// the next byte.
    pending_cr: Option<bool>,
    /// An event was dispatched and is cleared at the next call.
    dispatched: bool,
}

/// Where an event's data is.
#[derive(Debug, Clone, Copy)]
enum DataAt {
    None,
    Input(usize, usize),
    Owned,
}

impl SseParser {
    pub(super) fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            line_started: false,
            data_at: DataAt::None,
            data: Vec::new(),
            event_bytes: 0,
            oversized: false,
            pending_cr: None,
            dispatched: false,
        }
    }

    /// Parses `input` until it ends or an event is complete. Returns how
    /// many bytes it consumed and, when an event ended there, the event
    /// (its data borrowed from `input` where it lies in one line of it).
    pub(super) fn advance<'a>(&'a mut self, input: &'a [u8]) -> (usize, Option<Event<'a>>) {
        if self.dispatched {
            self.clear_event();
        }
        let mut at = 0;
        loop {
            if let Some(blank) = self.pending_cr {
                let Some(&next) = input.get(at) else {
                    break;
                };
                self.pending_cr = None;
                if next == b'\n' {
                    at += 1;
                    self.event_bytes += 1;
                }
                if blank {
                    self.dispatched = true;
                    return (at, Some(self.event(input)));
                }
                continue;
            }
            let rest = &input[at..];
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.carry_line(rest);
                at = input.len();
                break;
            };
            let terminator = rest[end];
            let blank = !self.line_started && end == 0;
            if !blank {
                self.end_line(input, at, at + end);
            }
            at += end + 1;
            self.event_bytes += 1;
            if terminator == b'\r' {
                self.pending_cr = Some(blank);
            } else if blank {
                self.dispatched = true;
                return (at, Some(self.event(input)));
            }
        }
        // The input is used up before the event's end: what of its data
        // lies in the input is kept, the input goes away.
        self.own_data(input);
        (at, None)
    }

    /// The event as it stands, `input` being the last call's.
    fn event<'a>(&'a self, input: &'a [u8]) -> Event<'a> {
        if self.oversized {
            return Event::Oversized;
        }
        match self.data_at {
            DataAt::None => Event::Empty,
            DataAt::Input(from, to) => Event::Data(&input[from..to]),
            DataAt::Owned => Event::Data(&self.data),
        }
    }

    /// Whether the current event went past the cap.
    pub(super) fn oversized(&self) -> bool {
        self.oversized
    }

    /// At the end of the stream: ends the last line as if it were
    /// terminated and returns the last event, finished or not, when it
    /// has data to look at. The parser starts afresh at the next call.
    pub(super) fn finish(&mut self) -> Option<&[u8]> {
        if self.dispatched {
            self.clear_event();
        }
        self.pending_cr = None;
        if self.line_started {
            self.end_line(&[], 0, 0);
        }
        self.dispatched = true;
        match self.event(&[]) {
            Event::Data(data) => Some(data),
            Event::Empty | Event::Oversized => None,
        }
    }

    /// Counts `bytes` into the event; whether it is still within the cap.
    fn count(&mut self, bytes: usize) -> bool {
        self.event_bytes = self.event_bytes.saturating_add(bytes);
        if !self.oversized && self.event_bytes > self.max_event_bytes {
            // Past the cap: drop what is held and only look for the end.
            self.oversized = true;
            self.line = Vec::new();
            self.data = Vec::new();
            self.data_at = DataAt::None;
        }
        !self.oversized
    }

    /// Keeps the start of a line that the input ends in.
    fn carry_line(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.line_started = true;
        if self.count(bytes.len()) {
            self.line.extend_from_slice(bytes);
        }
    }

    /// Ends the line that is `input[from..to]`, after what of it was
    /// carried from earlier inputs.
    fn end_line(&mut self, input: &[u8], from: usize, to: usize) {
        let carried = std::mem::take(&mut self.line_started);
        if !self.count(to - from) {
            return;
        }
        if !carried {
            self.field(input, from..to, true);
            return;
        }
        self.own_data(input);
        let mut line = std::mem::take(&mut self.line);
        line.extend_from_slice(&input[from..to]);
        self.field(&line, 0..line.len(), false);
        // Keep the allocation for the next line that spans inputs.
        line.clear();
        self.line = line;
    }

    /// Reads the field of the line `text[line]`; `in_input`: `text` is
    /// this call's input (else a carried line, which goes away).
    fn field(&mut self, text: &[u8], line: Range<usize>, in_input: bool) {
        let bytes = &text[line.clone()];
        let value = match bytes.iter().position(|&b| b == b':') {
            Some(colon) if &bytes[..colon] == b"data" => {
                let skip = usize::from(bytes.get(colon + 1) == Some(&b' '));
                line.start + colon + 1 + skip..line.end
            }
            // The line is the field's name alone: an empty value.
            None if bytes == b"data" => line.end..line.end,
            // A comment (a colon first), or a field not needed.
            _ => return,
        };
        match self.data_at {
            DataAt::None if in_input => self.data_at = DataAt::Input(value.start, value.end),
            DataAt::None => {
                self.data.clear();
                self.data.extend_from_slice(&text[value]);
                self.data_at = DataAt::Owned;
            }
            // A second `data` line: the lines are joined with `\n`. A
            // first line in the input is in `text` (`in_input`: a carried
            // line's caller owned the data first).
            DataAt::Input(..) | DataAt::Owned => {
                self.own_data(text);
                self.data.push(b'\n');
                self.data.extend_from_slice(&text[value]);
            }
        }
    }

    /// Copies the event's data out of `input` if it lies there.
    fn own_data(&mut self, input: &[u8]) {
        if let DataAt::Input(from, to) = self.data_at {
            self.data.clear();
            self.data.extend_from_slice(&input[from..to]);
            self.data_at = DataAt::Owned;
        }
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.data_at = DataAt::None;
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
            let (consumed, event) = self.parser.advance(&chunk[at..]);
            at += consumed;
            match event {
                Some(Event::Data(data)) => on_data(data),
                Some(Event::Empty | Event::Oversized) => {}
                None => break,
            }
        }
    }

    /// The stream ended: calls `on_data` with the last event if the stream
    /// stopped before its blank line.
    pub fn finish(&mut self, mut on_data: impl FnMut(&[u8])) {
        if let Some(data) = self.parser.finish() {
            on_data(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event's data, the input fed in pieces cut at `cuts`.
    fn events(input: &[u8], cuts: &[usize], max: usize) -> Vec<Vec<u8>> {
        let mut events = SseEvents::new(max);
        let mut seen = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain([&input.len()]) {
            events.feed(&input[from..cut], |d| seen.push(d.to_vec()));
            from = cut;
        }
        events.finish(|d| seen.push(d.to_vec()));
        seen
    }

    #[test]
    fn data_read_in_place_or_joined_is_the_same_however_the_input_is_cut() {
        let input: &[u8] = b"data: {\"a\":1}\n\n: comment\ndata:b\r\ndata\r\ndata:  c\r\rid: 7\nevent: x\ndata: d\n\nevent: only\n\ndata: e\rdata: f\n\r\ndata: [DONE]\n\ndata: tail";
        let want: Vec<Vec<u8>> = [
            &b"{\"a\":1}"[..],
            b"b\n\n c",
            b"d",
            b"e\nf",
            b"[DONE]",
            b"tail",
        ]
        .map(<[u8]>::to_vec)
        .to_vec();
        assert_eq!(events(input, &[], 1 << 20), want);
        for a in 0..=input.len() {
            assert_eq!(events(input, &[a], 1 << 20), want, "cut at {a}");
            for b in a..=input.len() {
                assert_eq!(events(input, &[a, b], 1 << 20), want, "cut at {a}, {b}");
            }
        }
    }

    #[test]
    fn an_event_past_the_cap_is_skipped_however_the_input_is_cut() {
        let input: &[u8] = b"data: 12345678\n\ndata: 1234\ndata: 5678\n\ndata: ok\n\n";
        let want = vec![b"ok".to_vec()];
        for a in 0..=input.len() {
            assert_eq!(events(input, &[a], 12), want, "cut at {a}");
        }
    }
}
