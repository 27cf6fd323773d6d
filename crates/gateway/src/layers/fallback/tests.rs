use std::sync::Mutex;

use tower::Layer;

use super::*;
use crate::config::Config;
use crate::layers::testing::{Probe, buffered, model_call, state_with};

fn with_fallbacks() -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.fallbacks.insert(
        "openai/gpt-4o".into(),
        vec!["nowhere/model".into(), "google/gemini-x".into()],
    );
    state_with(config)
}

/// Runs a call for `openai/gpt-4o` where each candidate answers with
/// `answer(model)`; returns what was served and the candidates tried.
async fn run(answer: fn(&str) -> Result<(), Failure>) -> (Served<Reply>, Vec<String>) {
    let state = with_fallbacks();
    let tried = Arc::new(Mutex::new(Vec::new()));
    let probe = {
        let tried = tried.clone();
        Probe::new(move |req: Req<Attempt>| {
            tried.lock().unwrap().push(req.call.model.clone());
            match answer(&req.call.model) {
                Ok(()) => Served::ok(buffered("{}"), req.notes),
                Err(f) => Served::err(f, req.notes),
            }
        })
    };
    let svc = FallbackLayer::new().layer(probe);
    let served = call(svc, model_call(&state, "openai/gpt-4o", false, &[])).await;
    let tried = tried.lock().unwrap().clone();
    (served, tried)
}

#[tokio::test]
async fn a_failed_model_falls_back_past_unknown_ones() {
    let (served, tried) = run(|model| {
        if model == "openai/gpt-4o" {
            Err(Failure::Upstream {
                message: "down".into(),
                attempts: 2,
            })
        } else {
            Ok(())
        }
    })
    .await;
    assert_eq!(tried, ["openai/gpt-4o", "google/gemini-x"]);
    assert!(served.result.is_ok());
    assert_eq!(served.notes.meta.model.as_deref(), Some("google/gemini-x"));
    assert_eq!(served.notes.label.as_deref(), Some("google/gemini-x"));
    assert_eq!(served.notes.meta.attempts, 2);
}

#[tokio::test]
async fn a_request_too_large_for_a_model_is_not_sent_to_another() {
    let (served, tried) = run(|_| {
        Err(Failure::Limited(ApiError::TooLarge(
            "needs 9000 tokens, more than the limit".into(),
        )))
    })
    .await;
    assert_eq!(tried, ["openai/gpt-4o"]);
    assert!(matches!(served.result, Err(ApiError::TooLarge(_))));
    assert_eq!(served.notes.meta.model, None);
}

#[tokio::test]
async fn the_last_failure_is_the_answer() {
    let (served, tried) = run(|_| {
        Err(Failure::Throttled {
            retry_after: None,
            attempts: 1,
        })
    })
    .await;
    assert_eq!(tried.len(), 2);
    assert_eq!(served.notes.meta.attempts, 2);
    match served.result {
        Err(ApiError::RateLimited { resource, .. }) => assert_eq!(resource, "google/gemini-x"),
        other => panic!("{other:?}"),
    }
}
