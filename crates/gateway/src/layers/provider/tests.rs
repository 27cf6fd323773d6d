use std::sync::Arc;

use serde_json::Value;

use super::*;
use crate::layers::testing::{limited, model_call};

fn attempt(state: &AppState, model: &str, headers: &[(&'static str, &'static str)]) -> Attempt {
    let call = model_call(state, model, false, headers).call;
    Attempt {
        model: call.model.clone(),
        deployment: None,
        call: Arc::from(call),
    }
}

#[tokio::test]
async fn the_plan_names_every_limit_the_call_is_under() {
    let model = "openai/gpt-4o-mini";
    let state = limited(model, 10.0, 10, Some(10_000));
    let a = attempt(&state, model, &[("x-sluice-thread", "t-1")]);
    let (adapter, outbound, plan, (prompt, completion), _) = prepare(&state, &a).expect("prepared");
    let resources: Vec<&str> = plan.needs.iter().map(|(r, _)| r.as_str()).collect();
    let tokens = tokens_resource(model);
    let session = session_resource("default", "t-1");
    assert_eq!(resources, [model, tokens.as_str(), session.as_str()]);
    assert!(plan.needs[1].1 > 0, "the estimate is reserved");
    assert!(
        prompt > 0 && prompt < plan.needs[1].1,
        "the prompt's estimate is part of it: {prompt}"
    );
    assert_eq!(
        prompt + completion,
        plan.needs[1].1,
        "with the completion's"
    );
    assert_eq!(plan.tokens.as_deref(), Some(tokens.as_str()));
    assert_eq!((plan.label.as_str(), plan.pool), ("openai", "model"));
    assert_eq!(adapter.format(), sluice_usage::WireFormat::Openai);
    // Sent upstream under the provider's own name for it.
    let body: Value = serde_json::from_slice(&outbound.body).unwrap();
    assert_eq!(body["model"], "gpt-4o-mini");
    assert!(
        outbound.url.ends_with("/chat/completions"),
        "{}",
        outbound.url
    );
}

#[tokio::test]
async fn an_unlimited_model_reserves_no_tokens() {
    let state = crate::layers::testing::state();
    let a = attempt(&state, "openai/gpt-4o-mini", &[]);
    let (_, _, plan, _, _) = prepare(&state, &a).expect("prepared");
    assert_eq!(plan.needs.len(), 1);
    assert_eq!(plan.tokens, None);
}

#[test]
fn only_the_provider_prefix_is_stripped() {
    let config = crate::config::Config::default();
    let prov = config.provider_for("openai/gpt-4o").unwrap();
    assert_eq!(upstream_model(prov, "openai/gpt-4o"), "gpt-4o");
    assert_eq!(upstream_model(prov, "openai/ft:openai/x"), "ft:openai/x");
    assert_eq!(upstream_model(prov, "openaix/gpt"), "openaix/gpt");
}
