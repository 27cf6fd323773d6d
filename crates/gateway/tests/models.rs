//! Model routes through the gateway to the sim: OpenAI chat, embeddings
//! and responses, Anthropic messages, and the headers every answer carries.

mod common;

use common::{Harness, chat, header};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_reach_the_provider_with_the_prefix_stripped() {
    let h = Harness::start().await;
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("x-request-id", "req-chat-1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-request-id"), "req-chat-1");
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    let queued: u64 = header(&res, "x-sluice-queue-ms").parse().expect("ms");
    assert!(queued < 15_000, "queue time within the deadline: {queued}");
    assert!(res.headers().get("x-sluice-model").is_none(), "no fallback");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gpt-4o-mini", "the sim saw the bare name");
    assert!(
        !body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let seen = h.sim.stats().model("gpt-4o-mini");
    assert_eq!((seen.requests, seen.ok), (1, 1));
    assert_eq!(seen.provider.as_deref(), Some("openai"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_an_id_gets_one() {
    let h = Harness::start().await;
    let a = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    let b = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    let (ida, idb) = (header(&a, "x-request-id"), header(&b, "x-request-id"));
    assert!(!ida.is_empty() && ida != idb, "{ida} vs {idb}");
    // Made-up ids do not deduplicate: both went upstream.
    assert_eq!(h.sim.stats().model("gpt-4o").requests, 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_pass_through() {
    let h = Harness::start().await;
    let res = h
        .send(
            "/v1/embeddings",
            &json!({"model": "openai/text-embedding-3-small", "input": ["one", "two"]}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    let body: Value = res.json().await.unwrap();
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["embedding"].as_array().unwrap().len(), 64);
    assert_eq!(h.sim.stats().model("text-embedding-3-small").ok, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_pass_through() {
    let h = Harness::start().await;
    let res = h
        .send(
            "/v1/responses",
            &json!({"model": "openai/gpt-4o", "input": "write a haiku", "max_output_tokens": 5}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().contains_key("x-sluice-queue-ms"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["usage"]["output_tokens"], 5);
    assert_eq!(h.sim.stats().model("gpt-4o").ok, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_pass_through() {
    let h = Harness::start().await;
    let res = h
        .post(
            "/v1/messages",
            &json!({
                "model": "anthropic/claude-3-5-haiku-latest",
                "max_tokens": 8,
                "system": "be brief",
                "messages": [{"role": "user", "content": "hello there"}],
            }),
        )
        .header("x-request-id", "req-msg-1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-request-id"), "req-msg-1");
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["type"], "message");
    assert_eq!(body["model"], "claude-3-5-haiku-latest");
    assert_eq!(body["content"][0]["type"], "text");
    assert_eq!(body["usage"]["output_tokens"], 8);
    let seen = h.sim.stats().model("claude-3-5-haiku-latest");
    assert_eq!(seen.ok, 1);
    assert_eq!(seen.provider.as_deref(), Some("anthropic"));
    h.stop().await;
}
