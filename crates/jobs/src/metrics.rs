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
//!
//! Labels are queue and kind names (bounded by configuration), never a
//! job id, tenant or group, to keep cardinality bounded. Kinds that call
//! upstreams count their 429s themselves (`sluice-jobs-http`).

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
