//! The OpenAI wire format: completions whole and streamed, embeddings,
//! responses, models.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::SimConfig;

#[tokio::test]
async fn chat_completion_has_real_usage_and_length_cut() {
    let sim = start(SimConfig::unlimited()).await;
    let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o-mini")).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "x-request-id").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let usage = &body["usage"];
    // "Say something short." is 20 characters: 5 tokens; 24 out by default.
    assert_eq!(usage["prompt_tokens"], 5);
    assert_eq!(usage["completion_tokens"], 24);
    assert_eq!(usage["total_tokens"], 29);

    let mut req = chat("gpt-4o-mini");
    req["max_completion_tokens"] = json!(3);
    let body: Value = post(&sim, "/v1/chat/completions", &req)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .split(' ')
            .count(),
        3
    );
}

#[tokio::test]
async fn chat_stream_sends_chunks_usage_chunk_and_done() {
    let sim = start(SimConfig::unlimited()).await;
    let whole: Value = post(&sim, "/v1/chat/completions", &chat("gpt-4o"))
        .await
        .json()
        .await
        .unwrap();

    let mut req = chat("gpt-4o");
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let events = stream(&sim, "/v1/chat/completions", &req).await;
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(Event::json).collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        content,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    // Every chunk but the last has usage null; the last has empty choices.
    let (last, rest) = chunks.split_last().unwrap();
    assert!(
        rest.iter()
            .all(|c| c["usage"].is_null() && c.get("usage").is_some())
    );
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], whole["usage"]);
    assert_eq!(rest.last().unwrap()["choices"][0]["finish_reason"], "stop");

    // Without include_usage: no usage chunk, no usage field.
    req["stream_options"] = json!({"include_usage": false});
    let (text, _) = read_body(post(&sim, "/v1/chat/completions", &req).await).await;
    let events = parse_sse(&text);
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e.json().get("usage").is_none())
    );
    assert_eq!(events.len(), 1 + 24 + 1 + 1);
}

#[tokio::test]
async fn embeddings_shape_dimensions_and_determinism() {
    let mut config = SimConfig::unlimited();
    config.embedding_dimensions = 12;
    let sim = start(config).await;
    let req = json!({"model": "text-embedding-3-small", "input": ["alpha", "beta", "alpha"]});
    let body: Value = post(&sim, "/v1/embeddings", &req)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "list");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["object"], "embedding");
        assert_eq!(d["index"], i);
        assert_eq!(d["embedding"].as_array().unwrap().len(), 12);
    }
    assert_eq!(data[0]["embedding"], data[2]["embedding"]);
    assert_ne!(data[0]["embedding"], data[1]["embedding"]);
    assert_eq!(body["usage"]["prompt_tokens"], 4);
    assert_eq!(body["usage"]["total_tokens"], 4);

    let req = json!({"model": "m", "input": "one", "dimensions": 3, "encoding_format": "base64"});
    let body: Value = post(&sim, "/v1/embeddings", &req)
        .await
        .json()
        .await
        .unwrap();
    // Three little-endian f32s: 12 bytes, 16 base64 characters.
    assert_eq!(body["data"][0]["embedding"].as_str().unwrap().len(), 16);
    let req = json!({"model": "m", "input": [[1, 2, 3], [4]]});
    let body: Value = post(&sim, "/v1/embeddings", &req)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["usage"]["prompt_tokens"], 4);
}

#[tokio::test]
async fn responses_whole_and_streamed() {
    let sim = start(SimConfig::unlimited()).await;
    let req = json!({"model": "gpt-4o", "input": "Tell me a story", "instructions": "Be brief", "max_output_tokens": 5});
    let body: Value = post(&sim, "/v1/responses", &req)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["output"][0]["type"], "message");
    assert_eq!(body["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(body["usage"]["output_tokens"], 5);
    assert_eq!(body["usage"]["input_tokens"], 6);

    let req =
        json!({"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}], "stream": true});
    let (text, failed) = read_body(post(&sim, "/v1/responses", &req).await).await;
    assert!(!failed);
    let events = parse_sse(&text);
    let names: Vec<&str> = events.iter().map(|e| e.name.as_deref().unwrap()).collect();
    assert_eq!(names[0], "response.created");
    assert_eq!(*names.last().unwrap(), "response.completed");
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "response.output_text.delta")
            .count(),
        24
    );
    let done = events.last().unwrap().json();
    assert_eq!(done["response"]["usage"]["output_tokens"], 24);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.json()["sequence_number"], i);
        assert_eq!(e.json()["type"], e.name.as_deref().unwrap());
    }
}

#[tokio::test]
async fn models_are_listed_in_both_formats() {
    let sim = start(SimConfig::default()).await;
    let ids = |body: &Value| -> Vec<String> {
        let data = body["data"].as_array().unwrap();
        data.iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let body: Value = get_json(&sim, "/v1/models", &[]).await;
    assert_eq!(body["object"], "list");
    let all = ids(&body);
    assert!(all.iter().any(|m| m == "gpt-4o-mini") && all.iter().any(|m| m == "claude-sonnet-4-5"));

    let headers = [("anthropic-version", "2023-06-01")];
    let body: Value = get_json(&sim, "/anthropic/v1/models", &headers).await;
    assert_eq!(body["has_more"], false);
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["type"] == "model")
    );
    assert_eq!(ids(&body), ["claude-3-5-haiku-latest", "claude-sonnet-4-5"]);
}

#[tokio::test]
async fn provider_comes_from_path_prefix_or_list() {
    let sim = start(SimConfig::default()).await;
    post(&sim, "/google/v1/chat/completions", &chat("some-model")).await;
    post(&sim, "/v1/chat/completions", &chat("deepseek-chat")).await;
    post(&sim, "/v1/chat/completions", &chat("minimax/x")).await;
    post(&sim, "/v1/messages", &message("unlisted")).await;
    let stats = sim.stats();
    for (model, provider) in [
        ("some-model", "google"),
        ("deepseek-chat", "deepseek"),
        ("minimax/x", "minimax"),
        ("unlisted", "anthropic"),
    ] {
        assert_eq!(stats.model(model).provider.as_deref(), Some(provider));
    }
}
