use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Value, json};

use super::*;

fn refused(body: Value) -> (String, String) {
    let b = to_chat(&body, "claude-x", "Anthropic").unwrap_err();
    (b.field, b.message)
}

#[test]
fn each_field_is_mapped() {
    let body = json!({
        "model": "anthropic/claude-x",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "max_output_tokens": 50,
        "temperature": 0.5,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
        "stream": true,
        "store": false,
    });
    let c = to_chat(&body, "claude-x", "Anthropic").unwrap();
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        m[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(m[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
    );
    assert_eq!(c["max_tokens"], 50);
    assert_eq!(c["tools"][0]["function"]["name"], "f");
    assert_eq!(c["tool_choice"]["function"]["name"], "f");
    assert_eq!(c["response_format"]["json_schema"]["name"], "w");
    assert_eq!(c["stream_options"]["include_usage"], true);
    // A plain string input is one user message.
    let c = to_chat(&json!({"input": "Hi"}), "m", "Gemini").unwrap();
    assert_eq!(c["messages"], json!([{"role": "user", "content": "Hi"}]));
}

#[test]
fn unsupported_fields_name_the_field_and_the_provider() {
    for (body, field) in [
        (
            json!({"input": "x", "previous_response_id": "r"}),
            "previous_response_id",
        ),
        (
            json!({"input": "x", "reasoning": {"effort": "low"}}),
            "reasoning",
        ),
        (
            json!({"input": "x", "tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
        (
            json!({"input": [{"type": "reasoning", "id": "r"}]}),
            "input[0].type",
        ),
    ] {
        let (f, message) = refused(body);
        assert_eq!(f, field);
        assert!(message.contains("Anthropic"), "{message}");
    }
    assert_eq!(refused(json!({"input": []})).0, "input");
}

#[test]
fn an_answer_becomes_a_response() {
    let body = json!({"id": "chatcmpl-1", "model": "claude-x", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Sure.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
        "finish_reason": "tool_calls"}]});
    let a = Answer {
        status: StatusCode::OK,
        body: Bytes::from(body.to_string()),
        usage: Some(sluice_usage::Usage {
            prompt_tokens: 10,
            completion_tokens: 4,
            total_tokens: 14,
        }),
        tool_calls: 1,
        details: sluice_usage::Details::default(),
    };
    let r: Value = serde_json::from_slice(&answer(a, "m").body).unwrap();
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"][0]["content"][0]["text"], "Sure.");
    assert_eq!(r["output"][1]["type"], "function_call");
    assert_eq!(r["output"][1]["call_id"], "call_1");
    assert_eq!(r["usage"]["input_tokens"], 10);
    assert_eq!(r["usage"]["total_tokens"], 14);
}
