//! The Anthropic wire format: messages whole and as the real SSE event
//! sequence.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::SimConfig;

#[tokio::test]
async fn message_has_usage_and_stop_reason() {
    let sim = start(SimConfig::unlimited()).await;
    let r = post(&sim, "/v1/messages", &message("claude-sonnet-4-5")).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "request-id").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["content"][0]["type"], "text");
    assert_eq!(body["stop_reason"], "end_turn");
    // "Hello there." is 12 characters: 3 tokens.
    assert_eq!(body["usage"]["input_tokens"], 3);
    assert_eq!(body["usage"]["output_tokens"], 24);

    let mut req = message("claude-sonnet-4-5");
    req["max_tokens"] = json!(2);
    req["system"] = json!([{"type": "text", "text": "abcd"}]);
    let body: Value = post(&sim, "/v1/messages", &req).await.json().await.unwrap();
    assert_eq!(body["stop_reason"], "max_tokens");
    assert_eq!(body["usage"]["output_tokens"], 2);
    assert_eq!(body["usage"]["input_tokens"], 4);
}

#[tokio::test]
async fn stream_follows_the_real_event_sequence() {
    let sim = start(SimConfig::unlimited()).await;
    let mut req = message("claude-3-5-haiku-latest");
    req["stream"] = json!(true);
    req["max_tokens"] = json!(4);
    let events = stream(&sim, "/v1/messages", &req).await;
    let names: Vec<&str> = events.iter().map(|e| e.name.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    for e in &events {
        assert_eq!(e.json()["type"], e.name.as_deref().unwrap());
    }
    let start = events[0].json();
    assert_eq!(start["message"]["usage"]["input_tokens"], 3);
    assert_eq!(start["message"]["content"], json!([]));
    assert_eq!(events[3].json()["delta"]["type"], "text_delta");
    let delta = events[8].json();
    assert_eq!(delta["usage"]["output_tokens"], 4);
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    let text: String = events[3..7]
        .iter()
        .map(|e| e.json()["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text.split(' ').count(), 4);
}

#[tokio::test]
async fn max_tokens_is_required() {
    let sim = start(SimConfig::unlimited()).await;
    let req =
        json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]});
    let r = post(&sim, "/v1/messages", &req).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("max_tokens")
    );
}
