//! Tool calls in every format, whole and streamed: a request that offers
//! tools on the user's turn gets a call with arguments from the tool's
//! schema; the same conversation with the tool's result gets text.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::SimConfig;

fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
        },
        "required": ["city", "unit"]
    })
}

fn openai_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "parameters": weather_schema()}}])
}

#[tokio::test]
async fn openai_chat_calls_the_tool_then_answers_its_result() {
    let sim = start(SimConfig::unlimited()).await;
    let ask = json!({"model": "gpt-4o", "tools": openai_tools(),
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let r: Value = post(&sim, "/v1/chat/completions", &ask)
        .await
        .json()
        .await
        .unwrap();
    let choice = &r["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "sim", "unit": "celsius"}));
    assert!(r["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    // The result sent back: text.
    let answered = json!({"model": "gpt-4o", "tools": openai_tools(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "18 C, sunny"}]});
    let r: Value = post(&sim, "/v1/chat/completions", &answered)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    assert!(
        !r["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );

    // Streamed: the id and name first, the arguments in pieces.
    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let events = stream(&sim, "/v1/chat/completions", &streamed).await;
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(Event::json)
        .collect();
    let first = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["function"]["name"], "get_weather");
    assert!(first["id"].as_str().unwrap().starts_with("call_"));
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, call["function"]["arguments"].as_str().unwrap());
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn anthropic_messages_use_the_tool_then_answer_its_result() {
    let sim = start(SimConfig::unlimited()).await;
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": weather_schema()}]);
    let ask = json!({"model": "claude-sonnet-4-5", "max_tokens": 200, "tools": tools,
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let r: Value = post(&sim, "/v1/messages", &ask).await.json().await.unwrap();
    assert_eq!(r["stop_reason"], "tool_use");
    let block = &r["content"][0];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "get_weather");
    assert_eq!(block["input"], json!({"city": "sim", "unit": "celsius"}));
    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));

    let answered = json!({"model": "claude-sonnet-4-5", "max_tokens": 200, "tools": tools, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "18 C"}]}]});
    let r: Value = post(&sim, "/v1/messages", &answered)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r["stop_reason"], "end_turn");
    assert_eq!(r["content"][0]["type"], "text");

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let events = stream(&sim, "/v1/messages", &streamed).await;
    let names: Vec<_> = events.iter().filter_map(|e| e.name.clone()).collect();
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    let start = events
        .iter()
        .find(|e| e.name.as_deref() == Some("content_block_start"))
        .unwrap()
        .json();
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["input"], json!({}));
    let partial: String = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("content_block_delta"))
        .map(|e| {
            e.json()["delta"]["partial_json"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        block["input"]
    );
    let delta = events
        .iter()
        .find(|e| e.name.as_deref() == Some("message_delta"))
        .unwrap()
        .json();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn gemini_calls_the_function_then_answers_its_response() {
    let sim = start(SimConfig::unlimited()).await;
    let tools = json!([{"functionDeclarations": [{"name": "get_weather", "parameters": weather_schema()}]}]);
    let ask = json!({"tools": tools, "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]});
    let path = "/v1beta/models/gemini-2.5-flash:generateContent";
    let r: Value = post(&sim, path, &ask).await.json().await.unwrap();
    let part = &r["candidates"][0]["content"]["parts"][0];
    assert_eq!(part["functionCall"]["name"], "get_weather");
    assert_eq!(
        part["functionCall"]["args"],
        json!({"city": "sim", "unit": "celsius"})
    );

    let answered = json!({"tools": tools, "contents": [
        {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        {"role": "model", "parts": [part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}]}]});
    let r: Value = post(&sim, path, &answered).await.json().await.unwrap();
    assert!(r["candidates"][0]["content"]["parts"][0]["text"].is_string());

    let events = stream(
        &sim,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        &ask,
    )
    .await;
    assert_eq!(events.len(), 1, "a call comes whole");
    let only = events[0].json();
    assert_eq!(
        only["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );
    assert_eq!(only["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn bad_tools_are_refused_naming_the_field() {
    let sim = start(SimConfig::unlimited()).await;
    let bad_openai = json!({"model": "gpt-4o", "tools": [{"type": "function", "function": {}}],
        "messages": [{"role": "user", "content": "hi"}]});
    let r = post(&sim, "/v1/chat/completions", &bad_openai).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("tools[0].function.name"));
    let bad_anthropic = json!({"model": "claude-x", "max_tokens": 10, "tools": [{"name": "x"}],
        "messages": [{"role": "user", "content": "hi"}]});
    let r = post(&sim, "/v1/messages", &bad_anthropic).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("tools.0.input_schema"));
}
