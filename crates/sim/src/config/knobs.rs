//! The three knobs every simulated upstream has: its limits, its latency
//! and the faults it injects.

use serde::{Deserialize, Serialize};

use crate::Error;

/// Slowest request rate (one every 11.6 days): slow enough for any test.
const MIN_RATE: f64 = 1e-6;
/// Fastest request rate.
const MAX_RATE: f64 = 1e9;

/// An upstream's own quota. Every field absent means unlimited.
///
/// Requests are a token bucket of `burst` refilled at
/// `requests_per_second`; tokens (models only) a bucket of
/// `tokens_per_minute` refilled evenly over the minute, as providers do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Sustained requests per second (fractions allowed: `0.5`).
    pub requests_per_second: Option<f64>,
    /// Requests that may arrive at once; defaults to the rate rounded up.
    pub burst: Option<u32>,
    /// Prompt plus completion tokens per minute.
    pub tokens_per_minute: Option<u64>,
}

impl Limits {
    /// No limit at all.
    pub const fn unlimited() -> Self {
        Limits {
            requests_per_second: None,
            burst: None,
            tokens_per_minute: None,
        }
    }

    /// `rate` requests per second, with a burst of the rate rounded up.
    pub const fn per_second(rate: f64) -> Self {
        Limits {
            requests_per_second: Some(rate),
            burst: None,
            tokens_per_minute: None,
        }
    }

    /// The same, allowing `burst` requests at once.
    pub const fn burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// The same, with a tokens-per-minute quota.
    pub const fn tokens_per_minute(mut self, tokens: u64) -> Self {
        self.tokens_per_minute = Some(tokens);
        self
    }

    /// The request limit in force, if any: (requests per second, burst),
    /// the burst defaulting to the rate rounded up.
    pub fn rate_and_burst(&self) -> Option<(f64, u32)> {
        let rate = self.requests_per_second?;
        let burst = self
            .burst
            .unwrap_or(rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32);
        Some((rate, burst))
    }

    /// The request bucket's (capacity, refill per second), if limited.
    pub(crate) fn request_bucket(&self) -> Option<(f64, f64)> {
        let (rate, burst) = self.rate_and_burst()?;
        Some((f64::from(burst), rate))
    }

    /// The token bucket's (capacity, refill per second), if limited.
    pub(crate) fn token_bucket(&self) -> Option<(f64, f64)> {
        let tpm = self.tokens_per_minute? as f64;
        Some((tpm, tpm / 60.0))
    }

    pub(crate) fn check(&self, key: &str) -> Result<(), Error> {
        if let Some(rate) = self.requests_per_second
            && !(MIN_RATE..=MAX_RATE).contains(&rate)
        {
            return Err(Error::invalid(
                format!("{key}.requests_per_second"),
                format!("must be between {MIN_RATE} and {MAX_RATE}"),
            ));
        }
        if self.burst == Some(0) {
            return Err(Error::invalid(format!("{key}.burst"), "must be at least 1"));
        }
        if self.burst.is_some() && self.requests_per_second.is_none() {
            return Err(Error::invalid(
                format!("{key}.burst"),
                "needs requests_per_second",
            ));
        }
        if self.tokens_per_minute == Some(0) {
            return Err(Error::invalid(
                format!("{key}.tokens_per_minute"),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// How slowly an upstream answers. All zero by default, so that
/// benchmarks measure the gateway and not the sim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Latency {
    /// Before a non-streamed answer.
    pub base_ms: u64,
    /// Before the first event of a stream (headers go out at once).
    pub ttft_ms: u64,
    /// Between two tokens of a stream.
    pub per_token_ms: u64,
    /// Network jitter on the way in: each request reaches the quota check
    /// after a delay drawn uniformly from 0 to this, so requests sent at
    /// a steady pace arrive unevenly, as they do at a real provider.
    pub jitter_ms: u64,
}

impl Latency {
    /// One draw of the jitter.
    pub(crate) fn jitter(jitter_ms: u64) -> std::time::Duration {
        if jitter_ms == 0 {
            return std::time::Duration::ZERO;
        }
        std::time::Duration::from_micros(fastrand::u64(0..=jitter_ms * 1_000))
    }
}

/// Faults to inject. A probability draws per admitted request (seeded by
/// `seed` in [`crate::SimConfig`]); `*_every = N` hits every Nth admitted
/// request, deterministically, for tests. Checked in the order hang, error,
/// disconnect, malformed; the first that hits wins.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// Probability of a server error.
    pub error_rate: f64,
    /// Every Nth admitted request gets a server error.
    pub error_every: Option<u64>,
    /// The statuses a server error takes, in turn (500…599).
    pub error_statuses: Vec<u16>,
    /// Probability of dropping the connection mid-response.
    pub disconnect_rate: f64,
    /// Every Nth admitted request loses its connection mid-response.
    pub disconnect_every: Option<u64>,
    /// Events of a stream sent before the connection drops.
    pub disconnect_after_chunks: u32,
    /// Probability of a malformed answer: a 200 whose JSON body is cut
    /// in half (whole on the wire, `Content-Length` and all), or a stream
    /// with an event that is not JSON and a line that is not SSE.
    pub malformed_rate: f64,
    /// Every Nth admitted request gets a malformed answer.
    pub malformed_every: Option<u64>,
    /// What a malformed answer that is not a stream holds.
    pub malformed_body: MalformedBody,
    /// Every answer's usage reports this many prompt tokens, whatever the
    /// prompt held: an upstream that misreports (one claimed 9×10¹⁵).
    pub claim_prompt_tokens: Option<u64>,
    /// Probability of a hang.
    pub hang_rate: f64,
    /// Every Nth admitted request hangs.
    pub hang_every: Option<u64>,
    /// How long a hang lasts: longer than any client timeout.
    pub hang_ms: u64,
    /// Answer every request with 429, whatever the quota says.
    pub force_429: bool,
    /// The wait a forced 429 asks for.
    pub force_429_retry_after_ms: u64,
}

/// The body of a malformed answer that is not a stream (always a 200).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MalformedBody {
    /// The JSON answer cut in half (`application/json`).
    #[default]
    Cut,
    /// An HTML error page, as a proxy in front of a provider sends
    /// (`text/html`).
    Html,
    /// Nothing (`application/json`, `Content-Length: 0`).
    Empty,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            error_rate: 0.0,
            error_every: None,
            error_statuses: vec![500, 502, 503],
            disconnect_rate: 0.0,
            disconnect_every: None,
            disconnect_after_chunks: 2,
            malformed_rate: 0.0,
            malformed_every: None,
            malformed_body: MalformedBody::Cut,
            claim_prompt_tokens: None,
            hang_rate: 0.0,
            hang_every: None,
            hang_ms: 600_000,
            force_429: false,
            force_429_retry_after_ms: 1_000,
        }
    }
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    pub(crate) fn check(&self, key: &str) -> Result<(), Error> {
        for (name, rate) in [
            ("error_rate", self.error_rate),
            ("disconnect_rate", self.disconnect_rate),
            ("malformed_rate", self.malformed_rate),
            ("hang_rate", self.hang_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(Error::invalid(
                    format!("{key}.{name}"),
                    "must be between 0 and 1",
                ));
            }
        }
        for (name, every) in [
            ("error_every", self.error_every),
            ("disconnect_every", self.disconnect_every),
            ("malformed_every", self.malformed_every),
            ("hang_every", self.hang_every),
        ] {
            if every == Some(0) {
                return Err(Error::invalid(
                    format!("{key}.{name}"),
                    "must be at least 1",
                ));
            }
        }
        if self.error_statuses.is_empty() {
            return Err(Error::invalid(
                format!("{key}.error_statuses"),
                "must list at least one status",
            ));
        }
        if let Some(bad) = self
            .error_statuses
            .iter()
            .find(|s| !(500..=599).contains(*s))
        {
            return Err(Error::invalid(
                format!("{key}.error_statuses"),
                format!("{bad} is not a 5xx status"),
            ));
        }
        Ok(())
    }
}
