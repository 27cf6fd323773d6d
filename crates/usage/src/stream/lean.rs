//! A JSON cursor that reads a few fields of a small document without
//! building anything: the stream scanner's fast path for OpenAI chat
//! chunks (see `chat.rs`), and whole OpenAI answers' (`answer.rs`). serde_json spends about 27 instructions a byte
//! on a typical 220-byte chunk matching keys and driving visitors; this
//! walks it with a handful.
//!
//! Every method answers `None` when the input is anything it is not sure
//! to read exactly as serde_json would (escaped keys, lone surrogates,
//! control characters, deep nesting, bad numbers): the caller then falls
//! back to the typed serde parse, so the fast path never changes a result.

/// Deeper than this, the cursor gives up (serde_json's own limit is 128).
const MAX_DEPTH: usize = 64;

/// A position in a JSON document, checked to be UTF-8 once at the start
/// (a string's quotes are ASCII, so its bounds are character bounds).
#[derive(Debug)]
pub struct Cursor<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Whether the document has no byte below 0x20 (compact JSON, as
    /// providers send it): then a string ends at the first `"` or `\\`
    /// that `memchr2` finds, many bytes at a time, with no control
    /// character to look for on the way.
    compact: bool,
}

/// A string value as it appears between its quotes.
#[derive(Debug, Clone, Copy)]
pub struct Str<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> Str<'a> {
    /// The string itself, when it has no escapes (else `None`: the caller
    /// falls back).
    pub fn plain(self) -> Option<&'a str> {
        (!self.escaped).then_some(self.raw)
    }

    /// Its length in characters once unescaped, as `str::chars().count()`
    /// counts the string serde_json would build.
    pub fn chars(self) -> Option<u64> {
        let bytes = self.raw.as_bytes();
        if !self.escaped {
            return Some(count_chars(bytes));
        }
        let (mut n, mut i) = (0u64, 0);
        while i < bytes.len() {
            let b = bytes[i];
            if b != b'\\' {
                n += u64::from(b & 0xC0 != 0x80);
                i += 1;
                continue;
            }
            match bytes.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let unit = hex4(bytes.get(i + 2..i + 6)?)?;
                    i += 6;
                    if (0xDC00..0xE000).contains(&unit) {
                        return None;
                    }
                    if (0xD800..0xDC00).contains(&unit) {
                        // A surrogate pair is one character; a lone half
                        // is an error to serde_json.
                        if bytes.get(i..i + 2)? != b"\\u" {
                            return None;
                        }
                        let low = hex4(bytes.get(i + 2..i + 6)?)?;
                        if !(0xDC00..0xE000).contains(&low) {
                            return None;
                        }
                        i += 6;
                    }
                }
                _ => return None,
            }
            n += 1;
        }
        Some(n)
    }
}

fn count_chars(bytes: &[u8]) -> u64 {
    let n = bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// How many bytes from the start of `bytes` need nothing done inside a
/// JSON string: up to the first `"`, `\\` or control character (or all
/// of them), what serde_json escapes. Eight bytes at a time: content
/// deltas and ids are most of a chunk's bytes (the gateway's trace lines
/// copy their strings by it too).
pub fn plain_run(bytes: &[u8]) -> usize {
    run_before::<true>(bytes)
}

/// How many bytes from the start of `bytes` come before the first `"`
/// or `\\` (or all of them): [`plain_run`] for a document with no control
/// character, one test fewer a word.
fn quote_or_backslash(bytes: &[u8]) -> usize {
    run_before::<false>(bytes)
}

/// The bytes before the first `"` or `\\`, or control character when
/// `CONTROLS`.
#[inline(always)]
fn run_before<const CONTROLS: bool>(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // A byte of the word is zero (`is(x ^ ONES * c)`: is `c`), or is below
    // 0x20: the lowest flagged byte is exact (a false flag only comes
    // from a borrow out of a true one below it), which is all this reads.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let x = u64::from_le_bytes(eight);
        let mut found = zero(x ^ (ONES * u64::from(b'"'))) | zero(x ^ (ONES * u64::from(b'\\')));
        if CONTROLS {
            found |= x.wrapping_sub(ONES * 0x20) & !x;
        }
        let found = found & HIGH;
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || (CONTROLS && b < 0x20))
        .unwrap_or(bytes.len() - at)
}

/// Four hex digits (no sign: `from_str_radix` alone would take `+abc`).
fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |n, &d| {
        let v = char::from(d).to_digit(16)?;
        Some(n << 4 | v)
    })
}

/// The known fields met so far in one object, one bit each: serde
/// rejects a duplicate, so the cursor leaves it to serde.
#[derive(Debug, Default)]
pub struct Seen(u16);

impl Seen {
    /// Notes `field` (0 to 15); `None` when it was met before.
    pub fn first(&mut self, field: u8) -> Option<()> {
        debug_assert!(field < 16);
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

/// `null` or a string without escapes.
pub fn optional_str<'a>(c: &mut Cursor<'a>) -> Option<Option<&'a str>> {
    if c.null()? {
        return Some(None);
    }
    c.string()?.plain().map(Some)
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, if they are UTF-8 (serde_json
    /// decides for those that are not).
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        // No early exit: the test runs many bytes at a time.
        let compact = !bytes.iter().fold(false, |c, &b| c | (b < 0x20));
        Some(Cursor {
            text,
            bytes,
            at: 0,
            compact,
        })
    }

    fn ws(&mut self) {
        // Compact JSON has none: one test for the common case.
        if self.bytes.get(self.at).is_some_and(|&b| b > b' ') {
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.at += 1)
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes `null` if it comes next; whether it did.
    pub fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `null`, or a whole number that fits a `u64`, as serde reads an
    /// `Option<u64>` (anything else, `-0` and `1.0` included, is left to
    /// serde).
    pub fn optional_u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.at;
        let mut n: u64 = 0;
        while let Some(&b) = self.bytes.get(self.at) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            n = n.checked_mul(10)?.checked_add(u64::from(d))?;
            self.at += 1;
        }
        let len = self.at - start;
        let leading_zero = len > 1 && self.bytes[start] == b'0';
        let fraction = matches!(self.bytes.get(self.at), Some(b'.' | b'e' | b'E'));
        if len == 0 || leading_zero || fraction {
            return None;
        }
        Some(Some(n))
    }

    /// A string value.
    pub fn string(&mut self) -> Option<Str<'a>> {
        self.eat(b'"')?;
        let (start, bytes) = (self.at, self.bytes);
        let (mut i, mut escaped) = (start, false);
        loop {
            // In a compact document no byte is a control character.
            i += if self.compact {
                quote_or_backslash(bytes.get(i..)?)
            } else {
                plain_run(bytes.get(i..)?)
            };
            match *bytes.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                _ => return None, // a control character
            }
        }
        let raw = self.text.get(start..i)?;
        self.at = i + 1;
        Some(Str { raw, escaped })
    }

    /// Walks an object, calling `field` with each key (unescaped keys
    /// only) and the cursor at its value, which `field` must consume.
    pub fn object(&mut self, mut field: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?.plain()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Walks an array, calling `item` with the cursor at each element,
    /// which `item` must consume; returns how many there were.
    pub fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<usize> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            item(self)?;
            n += 1;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(n);
                }
                _ => return None,
            }
        }
    }

    /// Skips one value of any kind, checking it as serde_json would.
    pub fn skip(&mut self) -> Option<()> {
        self.skip_at(0)
    }

    fn skip_at(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                if s.escaped {
                    s.chars()?;
                }
            }
            b'{' => self.object(|c, _| c.skip_at(depth + 1))?,
            b'[' => self.array(|c| c.skip_at(depth + 1)).map(drop)?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            _ => self.number()?,
        }
        Some(())
    }

    /// A number, by JSON's grammar.
    fn number(&mut self) -> Option<()> {
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.digits1()?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.digits1()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
    }

    fn digits1(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_run, quote_or_backslash};
    use proptest::prelude::*;

    fn naive(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(bytes.len())
    }

    #[test]
    fn plain_run_stops_at_the_first_quote_backslash_or_control() {
        for case in [
            &b""[..],
            b"abc",
            b"abcdefgh\"",
            b"abcdefghijklmnop",
            b"\x1f\"",
            b"ab\x00cd\"efgh",
            b"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\\",
            b"\x7f\x80\xff !#[]{}\n",
            b"\x21\x21\x21\x21\x21\x21\x21\x1f",
        ] {
            assert_eq!(plain_run(case), naive(case), "{case:?}");
        }
    }

    proptest! {
        #[test]
        fn plain_run_is_the_naive_search(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(plain_run(&bytes), naive(&bytes));
        }

        #[test]
        fn quote_or_backslash_is_the_naive_search(bytes in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(0x22_u8 ^ 0x80), Just(b'a'), Just(0xc3_u8)], 0..40)) {
            let naive = bytes.iter().position(|&b| b == b'"' || b == b'\\').unwrap_or(bytes.len());
            prop_assert_eq!(quote_or_backslash(&bytes), naive);
        }

        #[test]
        fn plain_run_is_the_naive_search_in_text(bytes in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(0x1f_u8), Just(0x20_u8), Just(b'a'), Just(0xc3_u8)], 0..40)) {
            prop_assert_eq!(plain_run(&bytes), naive(&bytes));
        }
    }
}
