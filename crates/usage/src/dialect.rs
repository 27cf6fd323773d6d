//! One dialect per wire format: how a format's requests are estimated, its
//! whole bodies and its streams read, and its errors written. Each format
//! is one file below (`dialect/openai.rs`, `anthropic.rs`, `gemini.rs`)
//! implementing [`Dialect`]; [`WireFormat::dialect`] is the one place that
//! names them all, so a new format is a variant, a file and an arm there,
//! and the compiler lists what its file is missing.

mod anthropic;
mod azure;
mod gemini;
pub(crate) mod openai;

use std::fmt;

use bytes::Bytes;
use serde_json::Value;

use crate::stream::Tally;
use crate::wire::{CacheTokens, RawUsage, WithUsage};
use crate::{BodyFacts, Details, Endpoint, Estimate, WireFormat, estimate};

pub(crate) use anthropic::Anthropic;
pub(crate) use azure::Azure;
pub(crate) use gemini::Gemini;
pub(crate) use openai::Openai;

impl WireFormat {
    /// How this format is read and written. A `&'static` value: choosing
    /// it allocates nothing, and a call through it is one indirect call.
    pub fn dialect(self) -> &'static dyn Dialect {
        match self {
            WireFormat::Openai => &Openai,
            WireFormat::Anthropic => &Anthropic,
            WireFormat::Gemini => &Gemini,
            WireFormat::Azure => &Azure,
        }
    }
}

/// A wire format's reading and writing, as the gateway needs it around a
/// call: the estimate before it, the usage after it (from a whole body or
/// scanned out of a stream), and the error that ends a stream it cannot
/// finish.
pub trait Dialect: fmt::Debug + Send + Sync {
    /// The format it is.
    fn format(&self) -> WireFormat;

    /// The most output tokens a chat request's `body` allows, `default`
    /// when it sets no limit (the other endpoints' limits are the same in
    /// every format; see [`crate::estimate`]).
    fn chat_limit(&self, body: &Value, default: u64) -> u64;

    /// What a whole (non-streamed) response body to `endpoint` says about
    /// itself (see [`crate::read_body`]).
    fn read_body(&self, endpoint: Endpoint, body: &[u8]) -> BodyFacts;

    /// The cached input and reasoning output in a whole response body (see
    /// [`crate::details`]); zeros for a body that is not JSON.
    fn details(&self, body: &[u8]) -> Details;

    /// Whether a stream from `endpoint` may end with a usage-only chunk
    /// that the gateway asked for and takes out again (OpenAI chat).
    fn has_usage_chunk(&self, endpoint: Endpoint) -> bool;

    /// Records in `tally` what one event's data (not `[DONE]`) of a stream
    /// from `endpoint` says; returns whether it is the usage-only chunk
    /// (see [`Dialect::has_usage_chunk`]).
    fn scan_event(&self, endpoint: Endpoint, tally: &mut Tally, data: &[u8]) -> bool;

    /// The SSE bytes of the error event that ends a stream from `endpoint`
    /// that the gateway cannot finish (see [`crate::error_event`]).
    fn error_event(&self, endpoint: Endpoint, code: &str, message: &str) -> Bytes;

    /// A request's tokens, estimated from its JSON body with `ratio`
    /// characters per token, `default` the output limit of a request that
    /// sets none (see [`crate::estimate`]).
    fn estimate(&self, endpoint: Endpoint, body: &Value, ratio: u64, default: u64) -> Estimate {
        let prompt = estimate::prompt_tokens(endpoint, body, ratio);
        let limit =
            estimate::completion_limit(endpoint, body, default, || self.chat_limit(body, default));
        Estimate::new(prompt, limit)
    }
}

/// The facts of a body whose usage object (counted as `cache` says) and
/// tool calls were read.
pub(crate) fn facts(
    cache: CacheTokens,
    endpoint: Endpoint,
    usage: Option<&RawUsage>,
    tool_calls: u32,
) -> BodyFacts {
    BodyFacts {
        usage: usage.and_then(|u| u.to_usage(cache, endpoint)),
        tool_calls,
        details: usage.map_or_else(Details::default, |u| raw_details(u, cache)),
    }
}

/// The details in a `usage` object counted as `cache` says.
fn raw_details(usage: &RawUsage, cache: CacheTokens) -> Details {
    Details::of(usage.cached(cache), usage.reasoning())
}

/// The details of a body whose usage is a `usage` object (OpenAI's,
/// Anthropic's), counted as `cache` says.
fn usage_details(cache: CacheTokens, body: &[u8]) -> Details {
    crate::details::Body::parse(body)
        .and_then(|b| b.usage)
        .map_or_else(Details::default, |u| raw_details(&u, cache))
}

/// The usage alone of a body whose tool-call parts have a shape of
/// their own.
fn usage_alone(cache: CacheTokens, endpoint: Endpoint, body: &[u8]) -> BodyFacts {
    BodyFacts {
        usage: serde_json::from_slice::<WithUsage>(body)
            .ok()
            .and_then(|b| b.usage?.to_usage(cache, endpoint)),
        tool_calls: 0,
        details: usage_details(cache, body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_has_its_own_dialect() {
        for format in [
            WireFormat::Openai,
            WireFormat::Anthropic,
            WireFormat::Gemini,
            WireFormat::Azure,
        ] {
            assert_eq!(format.dialect().format(), format);
        }
    }
}
