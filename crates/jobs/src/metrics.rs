//! The metrics jobs emit, through the `metrics` facade: whoever installs a
//! recorder (the gateway's Prometheus exporter) gets them; without one
//! they cost next to nothing.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `sluice_jobs_completed_total` | counter | `queue`, `kind` |
//! | `sluice_jobs_failed_total` | counter | `queue`, `kind`, `reason` = `retry`, `dead`, `throttled`, `rescued`, `released` |
//! | `sluice_job_duration_seconds` | histogram | `queue`, `kind` |
//! | `sluice_job_wait_seconds` | histogram | `queue` |
//! | `sluice_jobs_rate_limit_waits_total` | counter | `queue` |
//! | `sluice_jobs_upstream_429_total` | counter | `endpoint` |
//! | `sluice_jobs_global_429_total` | counter | — |
//! | `sluice_jobs_retry_after_seconds` | histogram | — |
//!
//! Labels are queue and kind names (bounded by configuration) and, for
//! 429s, the API name or Discord route template without ids, never a job
//! id, tenant or group, to keep cardinality bounded.

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

/// Jobs completed.
pub const COMPLETED: &str = "sluice_jobs_completed_total";
/// Failed runs by reason.
pub const FAILED: &str = "sluice_jobs_failed_total";
/// How long a handler ran.
pub const DURATION: &str = "sluice_job_duration_seconds";
/// From a job's `run_at` to the start of its run.
pub const WAIT: &str = "sluice_job_wait_seconds";
/// Runs that had to wait for the queue's or group's rate.
pub const RATE_LIMIT_WAITS: &str = "sluice_jobs_rate_limit_waits_total";
/// 429 answers from upstreams, by endpoint.
pub const UPSTREAM_429: &str = "sluice_jobs_upstream_429_total";
/// Discord's global 429s: critical, they lead to bans.
pub const GLOBAL_429: &str = "sluice_jobs_global_429_total";
/// The Retry-After of upstream 429s.
pub const RETRY_AFTER: &str = "sluice_jobs_retry_after_seconds";

/// Registers help text and units for every job metric with the installed
/// recorder. Call once after installing it.
pub fn describe() {
    describe_counter!(COMPLETED, "Jobs completed, by queue and kind.");
    describe_counter!(
        FAILED,
        "Failed job runs, by queue, kind and reason (retry, dead, throttled, rescued, released)."
    );
    describe_histogram!(DURATION, Unit::Seconds, "How long a job's handler ran.");
    describe_histogram!(
        WAIT,
        Unit::Seconds,
        "From a job's run_at to the start of its run."
    );
    describe_counter!(
        RATE_LIMIT_WAITS,
        "Job runs that waited for their queue's or group's rate limit."
    );
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

pub(crate) fn completed(queue: &str, kind: &str) {
    counter!(COMPLETED, "queue" => queue.to_owned(), "kind" => kind.to_owned()).increment(1);
}

pub(crate) fn failed(queue: &str, kind: &str, reason: &'static str) {
    counter!(FAILED, "queue" => queue.to_owned(), "kind" => kind.to_owned(), "reason" => reason)
        .increment(1);
}

pub(crate) fn duration(queue: &str, kind: &str, d: Duration) {
    histogram!(DURATION, "queue" => queue.to_owned(), "kind" => kind.to_owned())
        .record(d.as_secs_f64());
}

pub(crate) fn wait(queue: &str, d: Duration) {
    histogram!(WAIT, "queue" => queue.to_owned()).record(d.as_secs_f64());
}

pub(crate) fn rate_limit_wait(queue: &str) {
    counter!(RATE_LIMIT_WAITS, "queue" => queue.to_owned()).increment(1);
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
