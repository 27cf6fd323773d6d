//! Azure OpenAI: OpenAI's bodies under `/openai/deployments/{deployment}/…`
//! with the `api-version` query Azure requires and the key in `api-key`.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::{Limits, SimConfig};

const CHAT: &str = "/openai/deployments/gpt4o-eu/chat/completions?api-version=2024-10-21";

#[tokio::test]
async fn a_deployment_answers_in_openais_shape_and_names_its_model() {
    let sim = start(SimConfig::unlimited()).await;
    // Azure reads the model from the path; a body without one is fine.
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    let r = post(&sim, CHAT, &body).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt4o-eu");
    assert!(v["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let stats = sim.stats();
    assert_eq!(stats.model("gpt4o-eu").ok, 1);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = stream(&sim, CHAT, &streamed).await;
    assert_eq!(events.last().unwrap().data, "[DONE]");

    let embed = post(
        &sim,
        "/openai/deployments/embed-eu/embeddings?api-version=2024-10-21",
        &json!({"input": "hello"}),
    )
    .await;
    assert_eq!(embed.status(), 200);
}

#[tokio::test]
async fn without_an_api_version_there_is_no_such_resource() {
    let sim = start(SimConfig::unlimited()).await;
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    let r = post(&sim, "/openai/deployments/gpt4o-eu/chat/completions", &body).await;
    assert_eq!(r.status(), 404);
    let text = r.text().await.unwrap();
    assert!(text.contains("api-version"), "{text}");
    assert_eq!(sim.stats().model("gpt4o-eu").requests, 0);
}

#[tokio::test]
async fn the_key_goes_in_api_key_and_limits_show_what_remains() {
    let mut config = SimConfig::unlimited();
    config.api_key = Some("az-key".into());
    config.models.insert(
        "gpt4o-eu".into(),
        sluice_sim::ModelConfig {
            limits: Some(Limits::per_second(100.0).burst(5)),
            ..Default::default()
        },
    );
    let sim = start(config).await;
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{}{CHAT}", sim.url());
    // OpenAI's way is not Azure's.
    let bearer = client()
        .post(&url)
        .bearer_auth("az-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 401);
    let r = client()
        .post(&url)
        .header("api-key", "az-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-ratelimit-remaining-requests").as_deref(),
        Some("4")
    );
    assert!(header(&r, "x-ratelimit-limit-requests").is_none());
}
