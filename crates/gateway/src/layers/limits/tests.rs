use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tower::Layer;

use super::*;
use crate::layers::testing::{Probe, answer, first_try, limited, tried, upstream};
use crate::layers::upstream::Fault;

/// The stack below the limits, answering every attempt with `sent`.
fn below(
    state: &AppState,
    sent: fn() -> Result<crate::client::UpstreamResponse, Fault>,
    calls: Arc<AtomicUsize>,
) -> Probe<impl Fn(Req<Try>) -> Served<Pooled, Failure> + Send + Sync + 'static> {
    let state = state.clone();
    Probe::new(move |req: Req<Try>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let pool = state
            .admission
            .bulkheads
            .get("model")
            .try_acquire()
            .unwrap();
        Served::ok(
            Pooled {
                tried: tried(sent(), req.call.attempt),
                pool,
            },
            req.notes,
        )
    })
}

#[tokio::test(start_paused = true)]
async fn a_429_reaches_the_limiter_and_its_retry_after_comes_up() {
    let state = limited("m", 100.0, 100, None);
    let calls = Arc::new(AtomicUsize::new(0));
    let sent = || Ok(answer(429, &[("retry-after", "5")]));
    let svc = LimitsLayer::new().layer(below(&state, sent, calls));
    let served = call(svc, first_try(&state, upstream(&[("m", 1)], None, true))).await;
    let granted = served.result.expect("granted and sent");
    assert_eq!(granted.retry_after, Some(Duration::from_secs(5)));
    let capacity = state.limits.shared.get_capacity("m").await.unwrap();
    assert!(capacity.paused_for.is_some(), "{capacity:?}");
}

#[tokio::test(start_paused = true)]
async fn a_call_the_limiter_refuses_is_not_sent() {
    let state = limited("m", 1.0, 1, None);
    let calls = Arc::new(AtomicUsize::new(0));
    let sent = || Ok(answer(200, &[]));
    let svc = LimitsLayer::new().layer(below(&state, sent, calls.clone()));
    let served = call(
        svc.clone(),
        first_try(&state, upstream(&[("m", 1)], None, true)),
    )
    .await;
    assert!(served.result.is_ok());
    // The burst is spent and the next grant comes in a second: past a
    // deadline 10 ms away.
    let mut up = upstream(&[("m", 1)], None, true);
    up.deadline = Instant::now() + Duration::from_millis(10);
    let served = call(svc, first_try(&state, up)).await;
    match served.result {
        Err(Failure::Limited(ApiError::RateLimited { resource, .. })) => assert_eq!(resource, "m"),
        other => panic!("{other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_limit_can_ever_allow_is_too_large() {
    let state = limited("m", 1.0, 1, Some(100));
    let calls = Arc::new(AtomicUsize::new(0));
    let sent = || Err(Fault::Timeout);
    let svc = LimitsLayer::new().layer(below(&state, sent, calls.clone()));
    let tokens = crate::limits::resources::tokens_resource("m");
    let up = upstream(&[("m", 1), (&tokens, 1_000)], Some(&tokens), true);
    let served = call(svc, first_try(&state, up)).await;
    let f = served.result.expect_err("refused");
    assert!(!f.may_fall_back(), "{f:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
