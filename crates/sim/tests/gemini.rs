//! Gemini's native API: `generateContent`, `streamGenerateContent` (SSE
//! with `alt=sse`, else a JSON array), its errors and its model list.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::{Limits, SimConfig};

const GENERATE: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM: &str = "/google/v1beta/models/gemini-2.5-flash:streamGenerateContent";

fn generate(max: u64) -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "abcd"}]},
        "contents": [{"role": "user", "parts": [{"text": "Hello there."}]}],
        "generationConfig": {"maxOutputTokens": max},
    })
}

#[tokio::test]
async fn generate_content_has_usage_metadata_and_a_finish_reason() {
    let sim = start(SimConfig::unlimited()).await;
    let r = post(&sim, GENERATE, &generate(3)).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let candidate = &body["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    assert_eq!(candidate["finishReason"], "MAX_TOKENS");
    let text = candidate["content"]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(text.split(' ').count(), 3);
    // "abcd" and "Hello there." are 16 characters: 4 tokens.
    let usage = &body["usageMetadata"];
    assert_eq!(usage["promptTokenCount"], 4);
    assert_eq!(usage["candidatesTokenCount"], 3);
    assert_eq!(usage["totalTokenCount"], 7);
    assert_eq!(body["modelVersion"], "gemini-2.5-flash");

    let mut long = generate(1000);
    long["generationConfig"] = json!({});
    let body: Value = post(&sim, GENERATE, &long).await.json().await.unwrap();
    assert_eq!(body["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn stream_with_alt_sse_is_one_response_per_token() {
    let sim = start(SimConfig::unlimited()).await;
    let r = post(&sim, &format!("{STREAM}?alt=sse"), &generate(4)).await;
    assert_eq!(r.status(), 200);
    assert!(
        header(&r, "content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let (text, failed) = read_body(r).await;
    assert!(!failed);
    assert!(
        text.contains("\r\n\r\n"),
        "Google separates events with CRLF"
    );
    let events = parse_sse(&text.replace("\r\n", "\n"));
    assert_eq!(events.len(), 4);
    let counts: Vec<u64> = events
        .iter()
        .map(|e| {
            e.json()["usageMetadata"]["candidatesTokenCount"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(counts, [1, 2, 3, 4]);
    assert_eq!(
        events[3].json()["candidates"][0]["finishReason"],
        "MAX_TOKENS"
    );
    assert!(
        events[2].json()["candidates"][0]
            .get("finishReason")
            .is_none()
    );
}

#[tokio::test]
async fn stream_without_alt_is_a_json_array() {
    let sim = start(SimConfig::unlimited()).await;
    let r = post(&sim, STREAM, &generate(2)).await;
    assert_eq!(r.status(), 200);
    assert!(
        header(&r, "content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body.as_array().unwrap().len(), 2);
    assert_eq!(body[1]["usageMetadata"]["totalTokenCount"], 6);
}

#[tokio::test]
async fn bad_bodies_are_refused_in_google_s_shape() {
    let sim = start(SimConfig::unlimited()).await;
    for (body, field) in [
        (json!({}), "contents"),
        (json!({"contents": []}), "contents"),
        (
            json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}),
            "contents[0].role",
        ),
        (json!({"contents": [{"role": "user"}]}), "contents[0].parts"),
        (
            json!({"contents": [{"parts": [{"text": 3}]}]}),
            "contents[0].parts[0].text",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 0}}),
            "generationConfig.maxOutputTokens",
        ),
    ] {
        let r = post(&sim, GENERATE, &body).await;
        assert_eq!(r.status(), 400, "{body}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], 400);
        assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
        let violation = &e["error"]["details"][0]["fieldViolations"][0]["field"];
        assert_eq!(violation, field, "{body}");
    }
    let r = post(
        &sim,
        "/v1beta/models/gemini-2.5-flash:countTokens",
        &generate(1),
    )
    .await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn the_key_goes_in_x_goog_api_key_and_429s_are_resource_exhausted() {
    let mut config = limited_model(
        "gemini-2.5-flash",
        // One request, then a long wait.
        Limits::per_second(0.01).burst(1),
    );
    config.api_key = Some("g-key".into());
    let sim = start(config).await;
    let url = format!("{}{GENERATE}", sim.url());
    let send = |key: &'static str| {
        client()
            .post(&url)
            .header("x-goog-api-key", key)
            .json(&generate(1))
            .send()
    };
    assert_eq!(send("wrong").await.unwrap().status(), 401);
    let ok = send("g-key").await.unwrap();
    assert_eq!(ok.status(), 200);
    // Google sends no rate-limit headers.
    assert!(header(&ok, "x-ratelimit-limit-requests").is_none());
    let limited = send("g-key").await.unwrap();
    assert_eq!(limited.status(), 429);
    let e: Value = limited.json().await.unwrap();
    assert_eq!(e["error"]["status"], "RESOURCE_EXHAUSTED");
}

#[tokio::test]
async fn models_are_listed_google_s_way() {
    let sim = start(SimConfig::default()).await;
    let list: Value = get_json(&sim, "/google/v1beta/models", &[]).await;
    let names: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(!names.is_empty());
    assert!(names.iter().all(|n| n.starts_with("models/")), "{names:?}");
}
