use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower::Layer;

use super::*;
use crate::config::{Config, Deployment, ModelPool, Strategy};
use crate::layers::testing::{Probe, buffered, model_call, state_with};

const POOL: &str = "team/model";

/// A state with the pool `team/model` over `openai`'s `m-a` and
/// `deepseek`'s `m-b` (one request a second each, a burst of one), its
/// circuits opening after two failures for 500 ms.
fn pooled(strategy: Strategy) -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    let d = |provider: &str, model: &str| Deployment {
        provider: provider.into(),
        model: Some(model.into()),
        requests_per_second: 1.0,
        burst: 1,
        tokens_per_minute: None,
        max_in_flight: None,
        weight: 1,
    };
    config.pools.push(ModelPool {
        model: POOL.into(),
        strategy,
        failures_to_open: 2,
        open_ms: 500,
        deployments: vec![d("openai", "m-a"), d("deepseek", "m-b")],
    });
    config.retry.max_attempts = 3;
    state_with(config)
}

/// Runs a call for `model` where each try answers `answer(deployment)`;
/// returns what was served and the deployments tried.
async fn run(
    state: &AppState,
    model: &str,
    answer: impl Fn(Option<usize>) -> Result<(), Failure> + Send + Sync + 'static,
) -> (Served<Reply, Failure>, Vec<Option<usize>>) {
    let tried = Arc::new(Mutex::new(Vec::new()));
    let probe = {
        let tried = tried.clone();
        Probe::new(move |req: Req<Attempt>| {
            tried.lock().unwrap().push(req.call.deployment);
            match answer(req.call.deployment) {
                Ok(()) => Served::ok(buffered("{}"), req.notes),
                Err(f) => Served::err(f, req.notes),
            }
        })
    };
    let svc = PoolLayer::new().layer(probe);
    let Req { call: c, notes } = model_call(state, model, false, &[]);
    let attempt = Attempt {
        model: c.model.clone(),
        call: Arc::from(c),
        deployment: None,
    };
    let served = call(
        svc,
        Req {
            call: attempt,
            notes,
        },
    )
    .await;
    let tried = tried.lock().unwrap().clone();
    (served, tried)
}

fn down() -> Failure {
    Failure::Upstream {
        message: "upstream answered 500 after 1 attempts".into(),
        attempts: 1,
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_another_deployment_can_take_goes_there_after_a_failure() {
    let state = pooled(Strategy::Ordered);
    let (served, tried) = run(&state, POOL, |d| match d {
        Some(0) => Err(down()),
        _ => Ok(()),
    })
    .await;
    assert_eq!(tried, [Some(0), Some(1)], "the first, then the other");
    assert!(served.result.is_ok());
    assert_eq!(served.notes.meta.attempts, 1, "the failed try is counted");
}

#[tokio::test(start_paused = true)]
async fn failures_open_the_circuit_and_a_probe_closes_it() {
    let state = pooled(Strategy::Ordered);
    let fail_first = |d: Option<usize>| match d {
        Some(0) => Err(down()),
        _ => Ok(()),
    };
    run(&state, POOL, fail_first).await;
    run(&state, POOL, fail_first).await;
    // Two failures in a row: out, and calls go straight to the other.
    let (served, tried) = run(&state, POOL, fail_first).await;
    assert!(served.result.is_ok());
    assert_eq!(tried, [Some(1)]);
    let view = state.limits.pools.views();
    assert_eq!(view[0].deployments[0].circuit, "open");
    assert_eq!(view[0].deployments[0].failed, 2);
    // After `open_ms`, one call probes it; it answers, and it is back.
    tokio::time::advance(Duration::from_millis(500)).await;
    let (served, tried) = run(&state, POOL, |_| Ok(())).await;
    assert!(served.result.is_ok());
    assert_eq!(tried, [Some(0)], "the probe");
    let view = state.limits.pools.views();
    assert_eq!(view[0].deployments[0].circuit, "closed");
}

#[tokio::test(start_paused = true)]
async fn a_refusal_before_sending_is_not_tried_elsewhere() {
    let state = pooled(Strategy::Fill);
    let (served, tried) = run(&state, POOL, |_| {
        Err(Failure::Limited(ApiError::TooLarge("too large".into())))
    })
    .await;
    assert_eq!(tried.len(), 1);
    assert!(matches!(
        served.result,
        Err(Failure::Limited(ApiError::TooLarge(_)))
    ));
}

#[tokio::test(start_paused = true)]
async fn every_deployment_failing_ends_after_the_attempts_allowed() {
    let state = pooled(Strategy::Fill);
    let (served, tried) = run(&state, POOL, |_| Err(down())).await;
    assert_eq!(tried.len(), 3, "retry.max_attempts in all: {tried:?}");
    // Both were tried before either was tried again.
    assert_ne!(tried[0], tried[1]);
    match served.result {
        Err(Failure::Upstream { attempts, .. }) => assert_eq!(attempts, 3),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn fill_sends_a_call_to_the_deployment_that_can_take_it_now() {
    let state = pooled(Strategy::Fill);
    // The first's one token is taken: the second can take a call now.
    let held = state
        .limits
        .shared
        .try_acquire_many(&[("deployment:openai/m-a", 1)])
        .await
        .expect("a token");
    let (_, tried) = run(&state, POOL, |_| Ok(())).await;
    assert_eq!(tried, [Some(1)]);
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn other_models_pass_through() {
    let state = pooled(Strategy::Fill);
    let (served, tried) = run(&state, "openai/gpt-4o", |_| Ok(())).await;
    assert!(served.result.is_ok());
    assert_eq!(tried, [None]);
}
