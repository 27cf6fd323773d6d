//! How an answer is written into a Redis value: a version byte, the
//! length of a small JSON header (status, kept headers, usage), the
//! header, then the body; the whole LZ4-compressed with its length in
//! front.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::Usage;
use crate::cache::Answer;

/// The layout's version: a value of another version is not read (a miss).
const VERSION: u8 = 1;

#[derive(Serialize, Deserialize)]
struct Header {
    status: u16,
    headers: Vec<(String, String)>,
    usage: Option<Usage>,
}

/// Why a value could not be read: written by another version, or damaged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unreadable {
    /// Shorter than its own lengths say, or not LZ4.
    #[error("value is damaged")]
    Damaged,
    /// Says it holds more than the cache ever stores.
    #[error("value says it holds {0} bytes, more than the cache stores")]
    TooLarge(u64),
    /// Another layout.
    #[error("value has layout version {0}, not {VERSION}")]
    Version(u8),
}

/// The compressed value of `answer` and what it saved.
pub(crate) fn encode(answer: &Answer, usage: Option<Usage>) -> Vec<u8> {
    let header = Header {
        status: answer.status,
        headers: answer.headers.clone(),
        usage,
    };
    // A struct of strings and numbers always serializes.
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut plain = Vec::with_capacity(5 + header.len() + answer.body.len());
    plain.push(VERSION);
    plain.extend_from_slice(&(header.len() as u32).to_le_bytes());
    plain.extend_from_slice(&header);
    plain.extend_from_slice(&answer.body);
    lz4_flex::block::compress_prepend_size(&plain)
}

/// The answer and usage in `value`; `max_bytes` bounds what it may claim
/// to hold, so that a damaged length cannot make us allocate gigabytes.
pub(crate) fn decode(value: &[u8], max_bytes: u64) -> Result<(Answer, Option<Usage>), Unreadable> {
    let (len, compressed) = value.split_first_chunk::<4>().ok_or(Unreadable::Damaged)?;
    let len = u32::from_le_bytes(*len);
    if u64::from(len) > max_bytes {
        return Err(Unreadable::TooLarge(len.into()));
    }
    let plain =
        lz4_flex::block::decompress(compressed, len as usize).map_err(|_| Unreadable::Damaged)?;
    let (&version, rest) = plain.split_first().ok_or(Unreadable::Damaged)?;
    if version != VERSION {
        return Err(Unreadable::Version(version));
    }
    let (header_len, rest) = rest.split_first_chunk::<4>().ok_or(Unreadable::Damaged)?;
    let header_len = u32::from_le_bytes(*header_len) as usize;
    if header_len > rest.len() {
        return Err(Unreadable::Damaged);
    }
    let (header, body) = rest.split_at(header_len);
    let header: Header = serde_json::from_slice(header).map_err(|_| Unreadable::Damaged)?;
    let answer = Answer {
        status: header.status,
        headers: header.headers,
        body: Bytes::copy_from_slice(body),
    };
    Ok((answer, header.usage))
}
