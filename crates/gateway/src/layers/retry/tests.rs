use std::sync::atomic::{AtomicU32, Ordering};

use tower::Layer;

use super::*;
use crate::config::Config;
use crate::layers::Notes;
use crate::layers::testing::{Later, answer, state_with, tried, upstream};

fn state(max_attempts: u32) -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.retry.max_attempts = max_attempts;
    state_with(config)
}

/// The stack below retry: attempt `n` is answered by `sent(n)`, with the
/// Retry-After `wait` read from the headers.
fn below(
    state: &AppState,
    sent: fn(u32) -> Result<crate::client::UpstreamResponse, Fault>,
    wait: Option<Duration>,
    attempts: Arc<AtomicU32>,
) -> impl Next<Req<Try>, Served<Granted, Failure>> {
    let state = state.clone();
    Later::new(move |req: Req<Try>| {
        let state = state.clone();
        let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(req.call.attempt, n);
        async move {
            let grant = state
                .limits
                .shared
                .acquire_many(&[("m", 1)], None)
                .await
                .unwrap();
            let pool = match req.call.pool {
                Some(p) => p,
                None => state
                    .admission
                    .bulkheads
                    .get("model")
                    .try_acquire()
                    .unwrap(),
            };
            let granted = Granted {
                tried: tried(sent(n), n),
                pool,
                grant,
                retry_after: wait,
            };
            Served::ok(granted, req.notes)
        }
    })
}

async fn run(
    state: &AppState,
    sent: fn(u32) -> Result<crate::client::UpstreamResponse, Fault>,
    wait: Option<Duration>,
    retryable: bool,
) -> (Result<Answered, Failure>, u32) {
    let attempts = Arc::new(AtomicU32::new(0));
    let svc = RetryLayer::new().layer(below(state, sent, wait, attempts.clone()));
    let req = Req {
        call: Arc::new(upstream(&[("m", 1)], None, retryable)),
        notes: Notes::new(state),
    };
    let served = call(svc, req).await;
    (served.result, attempts.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn a_5xx_is_sent_again_and_the_next_answer_passes() {
    let state = state(3);
    let sent = |n| Ok(answer(if n == 1 { 503 } else { 200 }, &[]));
    let (result, attempts) = run(&state, sent, None, true).await;
    let answered = result.expect("answered");
    assert_eq!(answered.response.status().as_u16(), 200);
    assert_eq!((answered.attempts, attempts), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_may_not_be_repeated_passes_on_its_first_answer() {
    let state = state(3);
    let (result, attempts) = run(&state, |_| Ok(answer(503, &[])), None, false).await;
    assert_eq!(result.expect("passed on").response.status().as_u16(), 503);
    assert_eq!(attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_429_asking_longer_than_the_cap_fails_fast() {
    let state = state(3);
    let wait = Some(Duration::from_secs(3_600));
    let (result, attempts) = run(&state, |_| Ok(answer(429, &[])), wait, true).await;
    match result {
        Err(Failure::Throttled {
            retry_after,
            attempts: 1,
        }) => assert_eq!(retry_after, wait),
        other => panic!("{other:?}"),
    }
    assert_eq!(attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn timeouts_end_after_the_last_attempt() {
    let state = state(3);
    let (result, attempts) = run(&state, |_| Err(Fault::Timeout), None, true).await;
    assert!(
        matches!(result, Err(Failure::Timeout { attempts: 3 })),
        "{result:?}"
    );
    assert_eq!(attempts, 3);
}

#[test]
fn backoff_is_full_jitter_under_the_cap() {
    let cfg = RetryConfig {
        max_attempts: 10,
        initial_backoff_ms: 100,
        max_backoff_ms: 1_000,
        max_retry_after_ms: 0,
        attempt_timeout_ms: 0,
        min_time_left_ms: 0,
    };
    for attempt in 1..12 {
        let cap = (100u64 << (attempt - 1).min(30)).min(1_000);
        for _ in 0..50 {
            assert!(backoff(&cfg, attempt) <= Duration::from_millis(cap));
        }
    }
}
