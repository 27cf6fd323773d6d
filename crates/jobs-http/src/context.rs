//! The context a job attempt carries upstream, as a request through the
//! gateway does: an `x-request-id` naming the job and attempt, and a
//! W3C `traceparent`.
//!
//! A job enqueued with a `traceparent` continues that trace: each attempt
//! is a child of the enqueuer's span (same trace id and sampling flags, a
//! span of its own). A job enqueued without one is its own trace: every
//! attempt of it shares one trace id, made from the job's id and enqueue
//! time (the same on every worker), and is a span of its own.
//!
//! Whoever records the attempt as a span (the gateway's OpenTelemetry
//! export) runs it [`in_span`], so that the span it exports is the one
//! the upstream sees as its parent, with its sampling decision.

use std::future::Future;

use reqwest::RequestBuilder;
use sluice_jobs::Job;
use sluice_limit::headers::context::TraceParent;

tokio::task_local! {
    /// The attempt's own span, when its runner records it.
    static ATTEMPT: TraceParent;
}

/// Runs `attempt` (one job attempt, in this task) as the span `span`:
/// its calls carry `span` as their `traceparent`.
pub async fn in_span<F: Future>(span: TraceParent, attempt: F) -> F::Output {
    ATTEMPT.scope(span, attempt).await
}

/// A new span for `job`'s attempt under way, in the job's trace (not
/// sampled: the caller sets the flag it decides).
pub fn attempt_span(job: &Job) -> TraceParent {
    traceparent(job, random_span())
}

fn random_span() -> u64 {
    fastrand::u64(1..)
}

/// `r` with the context of `job`'s attempt under way.
pub(crate) fn attach(job: &Job, r: RequestBuilder) -> RequestBuilder {
    let span = ATTEMPT
        .try_with(|s| *s)
        .unwrap_or_else(|_| attempt_span(job));
    r.header("x-request-id", request_id(job))
        .header("traceparent", span.to_string())
}

/// `job-{id}-{attempt}`, counting the attempt under way.
pub(crate) fn request_id(job: &Job) -> String {
    format!("job-{}-{}", job.id, job.attempts.saturating_add(1))
}

/// The job's trace, sent by span `span`: the enqueuer's when it gave one.
pub(crate) fn traceparent(job: &Job, span: u64) -> TraceParent {
    if let Some(parent) = job
        .traceparent
        .as_deref()
        .and_then(|tp| TraceParent::parse(tp).ok())
    {
        return parent.child(span.to_be_bytes());
    }
    // The W3C recommends random-looking trace ids (samplers read their
    // bits): mix the two numbers rather than concatenating them.
    let created = job.created_at.as_millis() as u64;
    let id = job.id.0 as u64;
    let high = mix(id ^ mix(created));
    let low = mix(created.rotate_left(32) ^ id ^ 0x9e37_79b9_7f4a_7c15);
    let mut trace = [0; 16];
    trace[..8].copy_from_slice(&high.to_be_bytes());
    trace[8..].copy_from_slice(&low.to_be_bytes());
    TraceParent::new(trace, span.to_be_bytes(), 0)
}

/// SplitMix64's finalizer: a bijection that spreads every input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_jobs::{JobId, JobState, Timestamp};

    use super::*;

    fn job(id: i64, created: i64, attempts: u32) -> Job {
        Job {
            id: JobId(id),
            queue: "default".into(),
            kind: "http".into(),
            payload: json!({}),
            tenant: "acme".into(),
            group: "acme".into(),
            priority: 0,
            idempotency_key: None,
            attempts,
            max_attempts: 3,
            reschedules: 0,
            run_at: Timestamp::from_millis(created),
            state: JobState::Running,
            last_error: None,
            result: None,
            lease: None,
            created_at: Timestamp::from_millis(created),
            updated_at: Timestamp::from_millis(created),
            finished_at: None,
            traceparent: None,
            schedule: None,
            schedule_tick: None,
            progress: None,
            parent: None,
            pending_children: 0,
            on_child_failure: None,
        }
    }

    #[test]
    fn attempts_continue_the_enqueuers_trace() {
        const ENQUEUER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut j = job(7, 1_700_000_000_000, 0);
        j.traceparent = Some(ENQUEUER.into());
        let first = traceparent(&j, 1);
        j.attempts = 1;
        let second = traceparent(&j, 2);
        let parent = TraceParent::parse(ENQUEUER).unwrap();
        for attempt in [first, second] {
            assert_eq!(attempt.trace_id, parent.trace_id);
            assert_eq!(attempt.flags, parent.flags, "the enqueuer's sampling");
            assert_ne!(attempt.span_id, parent.span_id);
        }
        assert_ne!(first.span_id, second.span_id);
    }

    #[test]
    fn attempts_of_a_job_share_its_trace_and_not_their_spans() {
        let first = traceparent(&job(7, 1_700_000_000_000, 0), 1);
        let second = traceparent(&job(7, 1_700_000_000_000, 1), 2);
        assert_eq!(first.trace_id, second.trace_id);
        assert_ne!(first.span_id, second.span_id);
        let other = traceparent(&job(8, 1_700_000_000_000, 0), 1);
        assert_ne!(first.trace_id, other.trace_id);
        let parsed = TraceParent::parse(&first.to_string()).expect("a valid traceparent");
        assert_eq!(parsed, first);
    }

    #[tokio::test]
    async fn an_attempt_run_in_a_span_sends_that_span() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let j = job(7, 1_700_000_000_000, 0);
        let mut span = attempt_span(&j);
        span.flags = 1;
        let client = reqwest::Client::new();
        let sent = |r: RequestBuilder| {
            r.build().expect("a request").headers()["traceparent"]
                .to_str()
                .unwrap()
                .to_owned()
        };
        let inside = in_span(span, async {
            sent(attach(&j, client.get("http://127.0.0.1/")))
        })
        .await;
        assert_eq!(inside, span.to_string());
        let outside = sent(attach(&j, client.get("http://127.0.0.1/")));
        let outside = TraceParent::parse(&outside).unwrap();
        assert_eq!(
            outside.trace_id, span.trace_id,
            "the job's trace either way"
        );
        assert_ne!(outside.span_id, span.span_id);
        assert_eq!(outside.flags, 0);
    }

    #[test]
    fn the_request_id_names_the_job_and_attempt() {
        assert_eq!(request_id(&job(42, 0, 0)), "job-42-1");
        assert_eq!(request_id(&job(42, 0, 2)), "job-42-3");
    }
}
