//! A resource's name, stored inline when short (most keys are), so that an
//! idle key costs one allocation.
//!
//! Reading an inline name as a `str` checks its UTF-8 again, so hot paths
//! compare and hash [`Name::as_bytes`] and read the `str` only to report.

use std::fmt;
use std::ops::Deref;

/// Bytes kept inline: the enum stays the size of a `String`'s pointer and
/// length plus one.
const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum Name {
    Inline(u8, [u8; INLINE]),
    Heap(Box<str>),
}

impl Name {
    pub(crate) fn new(name: &str) -> Self {
        if name.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..name.len()].copy_from_slice(name.as_bytes());
            Name::Inline(name.len() as u8, bytes)
        } else {
            Name::Heap(name.into())
        }
    }

    /// The bytes, without checking them again as UTF-8 (for comparisons
    /// on the hot path).
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Inline(len, bytes) => &bytes[..*len as usize],
            Name::Heap(s) => s.as_bytes(),
        }
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            // Copied from a `str` whole: always valid.
            Name::Inline(..) => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Name::Heap(s) => s,
        }
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inline_long_on_the_heap() {
        for s in [
            "",
            "r",
            "session:00000000",
            "éèà-22-bytes-exactly!",
            "openai/gpt-4o-mini-2024-07-18",
        ] {
            let n = Name::new(s);
            assert_eq!(&*n, s);
            assert_eq!(n.as_bytes(), s.as_bytes());
            assert_eq!(matches!(n, Name::Inline(..)), s.len() <= INLINE);
        }
        assert_eq!(std::mem::size_of::<Name>(), 24);
    }
}
