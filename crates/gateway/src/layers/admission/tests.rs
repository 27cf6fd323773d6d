use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tower::Layer;

use super::*;
use crate::config::Config;
use crate::layers::model_call::Call;
use crate::layers::testing::{Later, buffered, model_call, state, state_with};

const MODEL: &str = "openai/gpt-4o-mini";

#[tokio::test]
async fn the_slot_goes_down_in_the_notes_and_the_wait_is_traced() {
    let state = state();
    let probe = Later::new(|req: Req<Box<Call>>| async move {
        assert!(req.notes.admission.is_some(), "the slot is held below");
        Served::ok(buffered("{}"), req.notes)
    });
    let mut served = call(
        AdmissionLayer::new().layer(probe),
        model_call(&state, MODEL, false, &[]),
    )
    .await;
    assert!(served.result.is_ok());
    let trace = served.notes.trace.take().expect("traced").finish();
    assert!(trace.spans.iter().any(|s| s.name == "queue"), "{trace:?}");
}

#[tokio::test(start_paused = true)]
async fn a_dispatched_request_lets_the_next_one_go_while_it_runs() {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.queue.concurrency = NonZeroUsize::new(1).unwrap();
    let state = state_with(config);
    let gate = Arc::new(Semaphore::new(0));
    let probe = {
        let gate = gate.clone();
        Later::new(move |mut req: Req<Box<Call>>| {
            let gate = gate.clone();
            async move {
                let first = req.call.ctx.request_id == "first";
                // Cleared the limiter: the slot goes to the next request.
                req.notes.admission.as_mut().unwrap().dispatched();
                if first {
                    let _open = gate.acquire().await.unwrap();
                }
                Served::ok(buffered("{}"), req.notes)
            }
        })
    };
    let svc = AdmissionLayer::new().layer(probe);
    let first = tokio::spawn(call(
        svc.clone(),
        model_call(&state, MODEL, false, &[("x-request-id", "first")]),
    ));
    tokio::task::yield_now().await;
    let second = tokio::time::timeout(
        Duration::from_secs(60),
        call(
            svc,
            model_call(&state, MODEL, false, &[("x-request-id", "second")]),
        ),
    )
    .await
    .expect("the second ran while the first still waited upstream");
    assert!(second.result.is_ok());
    assert!(!first.is_finished());
    gate.add_permits(1);
    assert!(first.await.unwrap().result.is_ok());
}
