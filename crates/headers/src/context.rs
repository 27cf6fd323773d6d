//! Request context headers: `x-request-id`, and W3C Trace Context
//! (`traceparent`, `tracestate`, <https://www.w3.org/TR/trace-context/>).
//!
//! Pure: ids are passed in by the caller (no random source here), so a
//! caller decides how ids are made and tests can pin them.
//!
//! ```
//! use sluice_headers::context::{TraceParent, valid_request_id};
//!
//! let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
//! let child = tp.child([1, 2, 3, 4, 5, 6, 7, 8]);
//! assert_eq!(child.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01");
//! assert!(valid_request_id("req-7f3a"));
//! assert!(!valid_request_id("two words"));
//! ```

use std::fmt;

/// Longest `x-request-id` taken from a client.
pub const MAX_REQUEST_ID: usize = 128;

/// Whether `id` may be used as a request id as is: 1 to
/// [`MAX_REQUEST_ID`] characters among ASCII letters, digits and
/// `-_.:+=@`. Ids end up in logs, traces and upstream headers, so
/// anything else (spaces, slashes, control characters) is replaced rather
/// than passed on.
pub fn valid_request_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:+=@".contains(&b))
}

/// Why a `traceparent` was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceParentError {
    /// Not `version-traceid-parentid-flags` in lowercase hex of the right
    /// lengths.
    Malformed,
    /// Version `ff`, which the specification forbids.
    ForbiddenVersion,
    /// A trace id or parent id of all zeros.
    ZeroId,
}

impl fmt::Display for TraceParentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceParentError::Malformed => {
                "not 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"
            }
            TraceParentError::ForbiddenVersion => "version ff is forbidden",
            TraceParentError::ZeroId => "an all-zero trace id or parent id is invalid",
        })
    }
}

impl std::error::Error for TraceParentError {}

/// A `traceparent`: the trace a request belongs to and the span that
/// sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace, shared by every span of it.
    pub trace_id: [u8; 16],
    /// The span that made the request carrying this header.
    pub span_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// A new trace: `trace_id` and `span_id` must not be all zeros (a zero
    /// id is made one, so the header stays valid).
    pub fn new(mut trace_id: [u8; 16], mut span_id: [u8; 8], flags: u8) -> TraceParent {
        if trace_id == [0; 16] {
            trace_id[15] = 1;
        }
        if span_id == [0; 8] {
            span_id[7] = 1;
        }
        TraceParent {
            trace_id,
            span_id,
            flags,
        }
    }

    /// Reads a `traceparent` value. Versions above `00` are read as `00`
    /// (their first four fields), as the specification asks.
    ///
    /// # Errors
    /// [`TraceParentError`] saying what is wrong.
    pub fn parse(value: &str) -> Result<TraceParent, TraceParentError> {
        let v = value.trim().as_bytes();
        if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
            return Err(TraceParentError::Malformed);
        }
        let version = hex::<1>(&v[0..2])?[0];
        if version == 0xff {
            return Err(TraceParentError::ForbiddenVersion);
        }
        // Version 00 is exactly 55 bytes; a later version may append
        // fields after another dash.
        if (version == 0 && v.len() != 55) || (v.len() > 55 && v[55] != b'-') {
            return Err(TraceParentError::Malformed);
        }
        let trace_id = hex::<16>(&v[3..35])?;
        let span_id = hex::<8>(&v[36..52])?;
        let flags = hex::<1>(&v[53..55])?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err(TraceParentError::ZeroId);
        }
        Ok(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }

    /// The same trace, sent by span `span_id` (a zero id is made one).
    pub fn child(&self, span_id: [u8; 8]) -> TraceParent {
        TraceParent::new(self.trace_id, span_id, self.flags)
    }

    /// The trace id in hex.
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// The span id in hex.
    pub fn span_id_hex(&self) -> String {
        to_hex(&self.span_id)
    }

    /// The header's value, `00-<trace id>-<span id>-<flags>`, as
    /// [`Display`](fmt::Display) writes it, in one allocation (every
    /// upstream attempt sends one).
    pub fn to_header(&self) -> String {
        let mut buf = *b"00-################################-################-##";
        write_hex(&mut buf[3..35], &self.trace_id);
        write_hex(&mut buf[36..52], &self.span_id);
        write_hex(&mut buf[53..55], &[self.flags]);
        ascii(&buf).to_owned()
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_header())
    }
}

/// Lowercase hex, two digits a byte. By table rather than `write!` or a
/// `push` per digit: every request formats a trace id and a span id or
/// two, and the formatter's machinery cost more than the request's JSON.
fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Appends `bytes` to `s` in lowercase hex, two digits a byte (see
/// [`to_hex`]): `{:016x}` of a `u64` is `push_hex` of its big-endian bytes.
pub fn push_hex(s: &mut String, bytes: &[u8]) {
    // Through a buffer on the stack, so `s` grows once a chunk rather
    // than once a digit.
    let mut buf = [0; 64];
    for chunk in bytes.chunks(buf.len() / 2) {
        let hex = &mut buf[..chunk.len() * 2];
        write_hex(hex, chunk);
        s.push_str(ascii(hex));
    }
}

/// Each byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut b = 0;
    while b < 256 {
        pairs[b] = [DIGITS[b >> 4], DIGITS[b & 0x0f]];
        b += 1;
    }
    pairs
};

/// Writes `bytes` in hex into `out`, two digits a byte, as far as `out`
/// holds them (the callers size it to `2 * bytes.len()`).
fn write_hex(out: &mut [u8], bytes: &[u8]) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
}

/// `buf`, which holds ASCII only (hex digits and dashes), as a `str`.
fn ascii(buf: &[u8]) -> &str {
    // Never the empty fallback: every byte written is from `HEX_PAIRS`
    // or an ASCII template. Checking costs a few instructions a word
    // where `unsafe` would cost the crate its `forbid(unsafe_code)`.
    std::str::from_utf8(buf).unwrap_or_default()
}

/// Lowercase hex into `N` bytes.
fn hex<const N: usize>(s: &[u8]) -> Result<[u8; N], TraceParentError> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(TraceParentError::Malformed),
    };
    if s.len() != 2 * N {
        return Err(TraceParentError::Malformed);
    }
    let mut out = [0; N];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(out)
}

/// Longest `tracestate` passed on (the specification's limit is 512
/// characters for what a vendor must propagate).
pub const MAX_TRACESTATE: usize = 512;

/// Whether `value` is a `tracestate` to pass on: at most 32 list members
/// of `key=value`, keys and values as the specification draws them, at
/// most [`MAX_TRACESTATE`] characters in all. Empty members are allowed.
pub fn valid_tracestate(value: &str) -> bool {
    if value.len() > MAX_TRACESTATE {
        return false;
    }
    let mut members = 0;
    for member in value.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        members += 1;
        let Some((key, val)) = member.split_once('=') else {
            return false;
        };
        if members > 32 || !valid_key(key) || !valid_value(val) {
            return false;
        }
    }
    true
}

fn valid_key(key: &str) -> bool {
    let part = |s: &str, max: usize, first_digit: bool| {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= max
            && (b[0].is_ascii_lowercase() || (first_digit && b[0].is_ascii_digit()))
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-*/".contains(c))
    };
    match key.split_once('@') {
        None => part(key, 256, false),
        Some((tenant, system)) => part(tenant, 241, true) && part(system, 14, false),
    }
}

fn valid_value(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 256
        && !v.ends_with(' ')
        && v.bytes()
            .all(|c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips() {
        let tp = TraceParent::parse(TP).unwrap();
        assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.span_id_hex(), "00f067aa0ba902b7");
        assert_eq!(tp.flags, 1);
        assert_eq!(tp.to_string(), TP);
        assert_eq!(tp.to_header(), TP);
    }

    #[test]
    fn push_hex_is_the_formatters_hex() {
        for n in [0u64, 1, 0xab, 0x0123_4567_89ab_cdef, u64::MAX] {
            let mut s = "x".to_owned();
            push_hex(&mut s, &n.to_be_bytes());
            assert_eq!(s, format!("x{n:016x}"));
        }
        // Longer than the buffer it writes through, every byte value.
        let all: Vec<u8> = (0..=255).chain(0..=255).collect();
        let mut s = String::new();
        push_hex(&mut s, &all);
        let formatted: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(s, formatted);
    }

    #[test]
    fn bad_traceparents_say_why() {
        use TraceParentError::*;
        let cases = [
            ("", Malformed),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                Malformed,
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                Malformed,
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                Malformed,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ForbiddenVersion,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                ZeroId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                ZeroId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é1",
                Malformed,
            ),
        ];
        for (value, why) in cases {
            assert_eq!(TraceParent::parse(value), Err(why), "{value:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_as_00() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(TraceParent::parse(later).unwrap().to_string(), TP);
    }

    #[test]
    fn a_child_keeps_the_trace_and_flags() {
        let tp = TraceParent::parse(TP).unwrap();
        let child = tp.child([9; 8]);
        assert_eq!((child.trace_id, child.flags), (tp.trace_id, tp.flags));
        assert_ne!(child.span_id, tp.span_id);
        assert_eq!(tp.child([0; 8]).span_id, [0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(TraceParent::parse(&TraceParent::new([0; 16], [0; 8], 0).to_string()).is_ok());
    }

    #[test]
    fn tracestate_members_are_checked() {
        assert!(valid_tracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"));
        assert!(valid_tracestate("tenant1@vendor=x, other=y ,"));
        assert!(valid_tracestate(""));
        assert!(!valid_tracestate("Congo=x"));
        assert!(!valid_tracestate("congo"));
        assert!(!valid_tracestate("congo=a=b"));
        assert!(!valid_tracestate("congo=\u{7f}"));
        assert!(!valid_tracestate(&"a=b,".repeat(33)));
        assert!(!valid_tracestate(&format!("a={}", "x".repeat(600))));
    }

    #[test]
    fn request_ids_are_bounded_and_plain() {
        assert!(valid_request_id("req_0123456789abcdef"));
        assert!(valid_request_id("4f1c2a9e-8d2b-4b1a-9c3e-1f2a3b4c5d6e"));
        assert!(valid_request_id(&"a".repeat(MAX_REQUEST_ID)));
        assert!(!valid_request_id(&"a".repeat(MAX_REQUEST_ID + 1)));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id("a/b"));
        assert!(!valid_request_id("é"));
        assert!(!valid_request_id("a\tb"));
    }
}
