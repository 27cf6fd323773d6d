use std::sync::Arc;
use std::time::Duration;

use tower::Layer;

use super::*;
use crate::layers::Notes;
use crate::layers::testing::{Later, answer, limited, upstream};
use crate::limits::resources::tokens_resource;
use crate::state::AppState;

const MODEL: &str = "m";

/// A call reserving 500 tokens of 1,000 a minute, answered by the stack
/// below; returns what the usage layer hands up.
async fn delivered(state: &AppState) -> Delivery {
    let tokens = tokens_resource(MODEL);
    let below = {
        let state = state.clone();
        let tokens = tokens.clone();
        Later::new(move |req: Req<Arc<Upstream>>| {
            let (state, tokens) = (state.clone(), tokens.clone());
            async move {
                let needs = [(MODEL, 1), (tokens.as_str(), 500)];
                let grant = state
                    .limits
                    .shared
                    .acquire_many(&needs, None)
                    .await
                    .unwrap();
                let pool = state
                    .admission
                    .bulkheads
                    .get("model")
                    .try_acquire()
                    .unwrap();
                let answered = Answered {
                    response: answer(200, &[]),
                    grant,
                    pool,
                    attempts: 1,
                    waited: Duration::ZERO,
                };
                Served::ok(answered, req.notes)
            }
        })
    };
    let up = upstream(&[(MODEL, 1), (&tokens, 500)], Some(&tokens), true);
    let req = Req {
        call: Arc::new(up),
        notes: Notes::new(state),
    };
    call(UsageLayer::new().layer(below), req)
        .await
        .result
        .expect("answered")
}

async fn available(state: &AppState) -> f64 {
    let c = state
        .limits
        .shared
        .get_capacity(&tokens_resource(MODEL))
        .await;
    c.unwrap().available
}

#[tokio::test(start_paused = true)]
async fn the_usage_reported_settles_the_tokens_reserved() {
    let state = limited(MODEL, 100.0, 100, Some(1_000));
    let d = delivered(&state).await;
    assert_eq!(available(&state).await, 500.0);
    d.reserved.settle_answer(
        Some(Usage {
            prompt_tokens: 60,
            completion_tokens: 40,
            total_tokens: 100,
        }),
        true,
    );
    assert_eq!(available(&state).await, 900.0);
}

#[tokio::test(start_paused = true)]
async fn without_a_report_the_estimate_stands() {
    let state = limited(MODEL, 100.0, 100, Some(1_000));
    let d = delivered(&state).await;
    d.reserved.settle_answer(None, true);
    assert_eq!(available(&state).await, 500.0);
}
