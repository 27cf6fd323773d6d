use std::num::NonZeroUsize;
use std::time::Duration;

use sluice_admit::{Admission, PoolConfig, Ticket};
use tokio::time::Instant;
use tower::Layer;

use super::*;
use crate::config::Config;
use crate::error::ApiError;
use crate::layers::testing::{Probe, first_try, state_with, tried, upstream};
use crate::layers::upstream::Fault;

fn one_slot() -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.queue.concurrency = NonZeroUsize::new(1).unwrap();
    config
        .bulkheads
        .insert("model".into(), PoolConfig::new(1, 0));
    state_with(config)
}

fn wire() -> Probe<impl Fn(Req<Try>) -> Served<Tried, Failure> + Send + Sync + 'static> {
    Probe::new(|req: Req<Try>| Served::ok(tried(Err(Fault::Timeout), req.call.attempt), req.notes))
}

#[tokio::test(start_paused = true)]
async fn the_slot_is_taken_once_and_kept_across_attempts() {
    let state = one_slot();
    let svc = BulkheadLayer::new().layer(wire());
    let first = call(
        svc.clone(),
        first_try(&state, upstream(&[("m", 1)], None, true)),
    )
    .await;
    let pool = first.result.expect("a slot").pool;
    // The second attempt brings the slot back down with it.
    let mut again = first_try(&state, upstream(&[("m", 1)], None, true));
    again.call.attempt = 2;
    again.call.pool = Some(pool);
    let second = call(svc.clone(), again).await;
    let _held = second.result.expect("the same slot").pool;
    // Another call finds the only slot taken and no room to wait.
    let other = call(svc, first_try(&state, upstream(&[("m", 1)], None, true))).await;
    match other.result {
        Err(Failure::Limited(ApiError::Unavailable { message, .. })) => {
            assert!(message.contains("model"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_with_a_slot_gives_its_admission_slot_back() {
    let state = one_slot();
    let deadline = Instant::now() + Duration::from_secs(60);
    let Ok(Admission::Run(permit)) = state
        .admission
        .queue
        .admit(Ticket::new("t", deadline))
        .await
    else {
        panic!("admitted");
    };
    let mut req = first_try(&state, upstream(&[("m", 1)], None, true));
    req.notes.admission = Some(permit);
    let served = call(BulkheadLayer::new().layer(wire()), req).await;
    assert!(served.notes.admission.is_some(), "still held for dedup");
    // The queue runs one at a time: the next request goes at once.
    let next = tokio::time::timeout(
        Duration::from_secs(30),
        state.admission.queue.admit(Ticket::new("t", deadline)),
    )
    .await
    .expect("the slot was given back");
    assert!(matches!(next, Ok(Admission::Run(_))));
}
