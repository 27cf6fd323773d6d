//! Azure OpenAI through the gateway, against the sim's Azure endpoints on
//! 127.0.0.1 (which require `api-version` and take the key only in
//! `api-key`): a chat, a stream with its usage, an embedding, each sent to
//! the deployment the model names.

mod common;

use common::{Harness, model_limits, sim_config, sse_data};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, ProviderConfig, WireFormat};

const KEY_VAR: &str = "SLUICE_TEST_AZURE_KEY";
const KEY: &str = "az-sim-key";

/// An `azure` provider at the sim, its key from a variable, `azure/…`
/// routed to it.
fn azure(c: &mut Config) {
    let openai = c.providers.iter().find(|p| p.name == "openai").unwrap();
    let sim = openai.base_url.trim_end_matches("/openai/v1").to_owned();
    c.providers.push(ProviderConfig {
        name: "azure".into(),
        base_url: sim,
        api_key_env: Some(KEY_VAR.into()),
        format: WireFormat::Azure,
        ..openai.clone()
    });
    c.secrets.insert(KEY_VAR, KEY);
    c.models.push(model_limits("azure/"));
}

async fn harness() -> Harness {
    let mut sim = sim_config();
    // The sim refuses a call without Azure's key header.
    sim.api_key = Some(KEY.into());
    Harness::with(sim, azure).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_stream_and_embeddings_reach_the_deployment() {
    let h = harness().await;
    let ask = json!({"model": "azure/gpt4o-eu", "max_tokens": 8,
        "messages": [{"role": "user", "content": "hello"}]});
    let res = h.send("/v1/chat/completions", &ask).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion", "{body}");
    assert_eq!(body["model"], "gpt4o-eu", "the deployment answered");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let res = h.send("/v1/chat/completions", &streamed).await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    // The gateway asked for the usage chunk and took it out again (the
    // client did not ask), having read it.
    assert!(data.iter().all(|d| !d.contains("\"usage\":{")), "{text}");

    let res = h
        .send(
            "/v1/embeddings",
            &json!({"model": "azure/embed-eu", "input": "hello"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);

    let stats = h.sim.stats();
    assert_eq!(
        stats.model("gpt4o-eu").ok,
        2,
        "chat and stream, with the key"
    );
    assert_eq!(stats.model("embed-eu").ok, 1);
    assert!(stats.model("gpt4o-eu").tokens_out > 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_name_that_is_not_one_segment_is_refused() {
    let h = harness().await;
    let res = h
        .send(
            "/v1/chat/completions",
            &json!({"model": "azure/team/gpt4o", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let body: Value = res.json().await.unwrap();
    assert!(body.to_string().contains("Azure deployment"), "{body}");
    assert_eq!(h.sim.stats().model("gpt4o").requests, 0);
    h.stop().await;
}
