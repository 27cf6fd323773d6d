//! The metrics of the kinds that call upstreams, through the `metrics`
//! facade, beside those of `sluice_jobs::metrics`.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `sluice_jobs_upstream_429_total` | counter | `endpoint` |
//! | `sluice_jobs_global_429_total` | counter | — |
//! | `sluice_jobs_retry_after_seconds` | histogram | — |
//!
//! The endpoint is the API name or the Discord route template without
//! ids, to keep cardinality bounded.

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

/// 429 answers from upstreams, by endpoint.
pub const UPSTREAM_429: &str = "sluice_jobs_upstream_429_total";
/// Discord's global 429s: critical, they lead to bans.
pub const GLOBAL_429: &str = "sluice_jobs_global_429_total";
/// The Retry-After of upstream 429s.
pub const RETRY_AFTER: &str = "sluice_jobs_retry_after_seconds";

/// Registers help text and units for these metrics with the installed
/// recorder. Call once after installing it.
pub fn describe() {
    describe_counter!(UPSTREAM_429, "429 answers to job calls, by endpoint.");
    describe_counter!(
        GLOBAL_429,
        "Discord global 429s (critical: repeated ones get a bot banned)."
    );
    describe_histogram!(
        RETRY_AFTER,
        Unit::Seconds,
        "Retry-After of 429 answers to job calls."
    );
}

pub(crate) fn upstream_429(endpoint: &str, retry_after: Option<Duration>) {
    counter!(UPSTREAM_429, "endpoint" => endpoint.to_owned()).increment(1);
    if let Some(d) = retry_after {
        histogram!(RETRY_AFTER).record(d.as_secs_f64());
    }
}

pub(crate) fn global_429() {
    counter!(GLOBAL_429).increment(1);
}
