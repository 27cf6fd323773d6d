//! Upstream rate-limit response headers, read into quotas the limiter
//! (`sluice-limit`, which re-exports this crate as `sluice_limit::headers`)
//! can bring its local buckets in step with.
//!
//! A pure parser: no I/O and no clock of its own. Timestamps become waits
//! relative to the `now` the caller passes.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use sluice_headers::RateLimitHeaders;
//!
//! let response = [
//!     ("x-ratelimit-limit-requests", "60"),
//!     ("x-ratelimit-remaining-requests", "59"),
//!     ("x-ratelimit-reset-requests", "1s"),
//!     ("x-ratelimit-remaining-tokens", "149984"),
//!     ("x-ratelimit-reset-tokens", "6m0s"),
//! ];
//! let parsed = RateLimitHeaders::parse(response, SystemTime::now());
//! assert_eq!(parsed.requests.unwrap().remaining, Some(59));
//! assert_eq!(parsed.tokens.unwrap().reset, Some(Duration::from_secs(360)));
//! ```
//!
//! # Headers read
//! Names are matched without regard to case.
//!
//! | upstream | headers | reset |
//! | --- | --- | --- |
//! | OpenAI | `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` | Go duration (`6m0s`) |
//! | Anthropic | `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}` | RFC 3339 |
//! | IETF drafts | `RateLimit`, `RateLimit-Policy`, `RateLimit-{Limit,Remaining,Reset}` | seconds |
//! | common | `X-RateLimit-{Limit,Remaining,Reset}`, `X-RateLimit-Reset-After` | seconds or Unix time |
//! | HTTP | `Retry-After`, `Retry-After-Ms` | seconds or HTTP-date |
//!
//! The generic IETF and `X-RateLimit-*` headers describe the request quota
//! only when no provider-specific request header does.
//!
//! [`context`] reads the request context headers the gateway passes on:
//! `x-request-id` and W3C Trace Context.

pub mod context;
mod ietf;
mod rfc3339;
#[cfg(test)]
mod tests;
mod time;

pub use rfc3339::{format_rfc3339, rfc3339 as parse_rfc3339};
pub use time::{parse_reset, parse_retry_after};

use std::time::{Duration, SystemTime};

/// One quota as an upstream reports it; each part is `None` when the
/// upstream did not send it or sent something unreadable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// The most the quota allows per window.
    pub limit: Option<u64>,
    /// What is left of it now.
    pub remaining: Option<u64>,
    /// How long until it is full again.
    pub reset: Option<Duration>,
}

impl Quota {
    /// `Some(self)` if any part is known.
    fn known(self) -> Option<Self> {
        (self != Self::default()).then_some(self)
    }
}

/// What an upstream's response headers say about its rate limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// The request quota.
    pub requests: Option<Quota>,
    /// The token quota: the combined one where the upstream sends it, else
    /// whichever of `input_tokens` and `output_tokens` has less remaining.
    pub tokens: Option<Quota>,
    /// The input (prompt) token quota, where reported apart.
    pub input_tokens: Option<Quota>,
    /// The output (completion) token quota, where reported apart.
    pub output_tokens: Option<Quota>,
    /// How long the upstream asks us to wait before retrying
    /// (`Retry-After-Ms`, else `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The window of the IETF `RateLimit-Policy` that the request quota
    /// belongs to (its `w=`).
    pub policy_window: Option<Duration>,
    /// True when the request quota comes from a provider whose buckets
    /// refill continuously and whose reset is the time until full, written
    /// as a duration (OpenAI's `x-ratelimit-reset-requests: 20ms`): its
    /// answers then tell the refill rate (see `adaptive::estimate`).
    /// Anthropic's resets are timestamps to the second, too coarse for it;
    /// the generic `X-RateLimit-*` headers often count fixed windows.
    pub refills: bool,
}

impl RateLimitHeaders {
    /// How long a 429 with these headers asks to pause: the Retry-After,
    /// else the request quota's reset when nothing remains of it.
    pub fn throttle_wait(&self) -> Option<Duration> {
        self.retry_after.or_else(|| {
            let q = self.requests.as_ref()?;
            q.reset.filter(|_| q.remaining == Some(0))
        })
    }

    /// Reads the rate-limit headers among `headers`, ignoring the others.
    ///
    /// Values that cannot be read leave their field `None`; where a header
    /// repeats, the first readable value counts. Times are turned into
    /// waits from `now`.
    pub fn parse<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: SystemTime,
    ) -> Self {
        let mut quotas = [Quota::default(); SOURCES];
        let mut ietf = ietf::Ietf::default();
        let (mut retry_after, mut retry_after_ms, mut reset_after) = (None, None, None);
        let mut fine_reset = false;
        for (name, value) in headers {
            let Some(slot) = slot(name) else { continue };
            match slot {
                Slot::Quota(source, part) => {
                    let quota = &mut quotas[source as usize];
                    match part {
                        Part::Limit => fill(&mut quota.limit, || parse_count(value)),
                        Part::Remaining => fill(&mut quota.remaining, || parse_count(value)),
                        Part::Reset => {
                            if matches!(source, Source::Requests) && quota.reset.is_none() {
                                // A timestamp (Anthropic's, to the second)
                                // is too coarse to tell a rate by.
                                fine_reset = !value.contains(':');
                            }
                            fill(&mut quota.reset, || parse_reset(value, now));
                        }
                    }
                }
                Slot::IetfLimit => {
                    let limit = ietf.add_limit(value);
                    fill(&mut quotas[Source::Ietf as usize].limit, || limit);
                }
                Slot::IetfCurrent => ietf.add_current(value, now),
                Slot::IetfPolicy => ietf.add_policies(value),
                Slot::RetryAfter => fill(&mut retry_after, || parse_retry_after(value, now)),
                Slot::RetryAfterMs => fill(&mut retry_after_ms, || time::millis(value)),
                Slot::ResetAfter => fill(&mut reset_after, || time::seconds(value)),
            }
        }

        let known = |source: Source| quotas[source as usize].known();
        let (ietf, policy_window) = ietf.finish(quotas[Source::Ietf as usize]);
        let mut common = quotas[Source::Common as usize];
        // A relative reset cannot suffer from clock skew, unlike the Unix
        // time that `X-RateLimit-Reset` often carries.
        common.reset = reset_after.or(common.reset);

        let (input_tokens, output_tokens) = (known(Source::Input), known(Source::Output));
        let provider = known(Source::Requests);
        Self {
            refills: provider.is_some() && fine_reset,
            requests: provider.or(ietf).or(common.known()),
            tokens: known(Source::Tokens).or_else(|| tighter(input_tokens, output_tokens)),
            input_tokens,
            output_tokens,
            // Milliseconds are the finer of the two (OpenAI sends both).
            retry_after: retry_after_ms.or(retry_after),
            policy_window,
        }
    }

    /// True when no rate-limit header was read.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Of two quotas, the one with less remaining (unknown counts as
/// unlimited; a tie goes to `a`).
fn tighter(a: Option<Quota>, b: Option<Quota>) -> Option<Quota> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let left = |q: Quota| q.remaining.unwrap_or(u64::MAX);
            Some(if left(b) < left(a) { b } else { a })
        }
        (a, b) => a.or(b),
    }
}

/// Sets `slot` from `parse` unless it already holds a value.
fn fill<T>(slot: &mut Option<T>, parse: impl FnOnce() -> Option<T>) {
    if slot.is_none() {
        *slot = parse();
    }
}

/// A non-negative integer count; overflow is unreadable, not saturated.
fn parse_count(value: &str) -> Option<u64> {
    let value = value.trim();
    // `u64::from_str` alone would also take a leading `+`.
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Where a quota header's value comes from, before precedence is applied.
#[derive(Debug, Clone, Copy)]
enum Source {
    Requests,
    Tokens,
    Input,
    Output,
    /// `RateLimit-Limit`, `-Remaining`, `-Reset`.
    Ietf,
    /// `X-RateLimit-*`.
    Common,
}

const SOURCES: usize = Source::Common as usize + 1;

#[derive(Debug, Clone, Copy)]
enum Part {
    Limit,
    Remaining,
    Reset,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    Quota(Source, Part),
    IetfLimit,
    IetfCurrent,
    IetfPolicy,
    RetryAfter,
    RetryAfterMs,
    ResetAfter,
}

/// Every header read, lowercase, by the prefix its group shares: a name
/// is compared with its group's only, and most of an answer's headers
/// (`content-type`, `date`, `x-request-id`) with none.
const GROUPS: &[(&str, &[(&str, Slot)])] = {
    use Part::{Limit, Remaining, Reset};
    use Slot::Quota as Q;
    use Source::{Common, Ietf, Input, Output, Requests, Tokens};
    &[
        (
            "x-ratelimit",
            &[
                ("x-ratelimit-limit-requests", Q(Requests, Limit)),
                ("x-ratelimit-remaining-requests", Q(Requests, Remaining)),
                ("x-ratelimit-reset-requests", Q(Requests, Reset)),
                ("x-ratelimit-limit-tokens", Q(Tokens, Limit)),
                ("x-ratelimit-remaining-tokens", Q(Tokens, Remaining)),
                ("x-ratelimit-reset-tokens", Q(Tokens, Reset)),
                ("x-ratelimit-limit", Q(Common, Limit)),
                ("x-ratelimit-remaining", Q(Common, Remaining)),
                ("x-ratelimit-reset", Q(Common, Reset)),
                ("x-ratelimit-reset-after", Slot::ResetAfter),
            ],
        ),
        (
            "anthropic-ratelimit-",
            &[
                ("anthropic-ratelimit-requests-limit", Q(Requests, Limit)),
                (
                    "anthropic-ratelimit-requests-remaining",
                    Q(Requests, Remaining),
                ),
                ("anthropic-ratelimit-requests-reset", Q(Requests, Reset)),
                ("anthropic-ratelimit-tokens-limit", Q(Tokens, Limit)),
                ("anthropic-ratelimit-tokens-remaining", Q(Tokens, Remaining)),
                ("anthropic-ratelimit-tokens-reset", Q(Tokens, Reset)),
                ("anthropic-ratelimit-input-tokens-limit", Q(Input, Limit)),
                (
                    "anthropic-ratelimit-input-tokens-remaining",
                    Q(Input, Remaining),
                ),
                ("anthropic-ratelimit-input-tokens-reset", Q(Input, Reset)),
                ("anthropic-ratelimit-output-tokens-limit", Q(Output, Limit)),
                (
                    "anthropic-ratelimit-output-tokens-remaining",
                    Q(Output, Remaining),
                ),
                ("anthropic-ratelimit-output-tokens-reset", Q(Output, Reset)),
            ],
        ),
        (
            "ratelimit",
            &[
                ("ratelimit", Slot::IetfCurrent),
                ("ratelimit-policy", Slot::IetfPolicy),
                ("ratelimit-limit", Slot::IetfLimit),
                ("ratelimit-remaining", Q(Ietf, Remaining)),
                ("ratelimit-reset", Q(Ietf, Reset)),
            ],
        ),
        (
            "retry-after",
            &[
                ("retry-after", Slot::RetryAfter),
                ("retry-after-ms", Slot::RetryAfterMs),
            ],
        ),
    ]
};

/// The names `name`, trimmed, may be among, by its prefix (any case).
fn group(name: &str) -> Option<&'static [(&'static str, Slot)]> {
    let name = name.trim().as_bytes();
    GROUPS
        .iter()
        .find(|(prefix, _)| {
            name.get(..prefix.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(prefix.as_bytes()))
        })
        .map(|&(_, names)| names)
}

/// Whether [`RateLimitHeaders::parse`] may read a header named `name`: a
/// test of its prefix only, so that a caller can skip the others' values
/// (converting a value to `&str` costs more than this).
pub fn may_read(name: &str) -> bool {
    group(name).is_some()
}

fn slot(name: &str) -> Option<Slot> {
    let names = group(name)?;
    let name = name.trim();
    names
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, slot)| slot)
}
