use bytes::Bytes;
use serde_json::{Value, json};
use sluice_usage::WireFormat;

use super::*;
use crate::providers::StreamReader;
use crate::providers::gemini::events::Events;
use crate::providers::translate::{Translated, parse, run};

fn chat(body: Value) -> Chat {
    parse(&body, ACCEPTS).unwrap()
}

#[test]
fn the_request_becomes_generate_content() {
    let c = chat(json!({
        "model": "google/gemini",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":\"it\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "smell", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"seen\":\"a cat\"}"},
            {"role": "tool", "tool_call_id": "c2", "content": "nothing"},
        ],
        "max_tokens": 50,
        "stop": "END",
        "temperature": 0.1,
        "top_p": 0.9,
        "n": 2,
        "seed": 5,
        "response_format": {"type": "json_object"},
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "look"}},
    }));
    let r = request(&c, 1_024).unwrap();
    assert_eq!(
        r["systemInstruction"],
        json!({"parts": [{"text": "Be terse."}]})
    );
    assert_eq!(
        r["generationConfig"],
        json!({"maxOutputTokens": 50, "stopSequences": ["END"], "temperature": 0.1, "topP": 0.9,
               "candidateCount": 2, "seed": 5, "responseMimeType": "application/json"})
    );
    assert_eq!(r["tools"][0]["functionDeclarations"][0]["name"], "look");
    assert_eq!(
        r["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["look"]}})
    );
    let contents = r["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{contents:?}");
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "AAAA"}})
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][0],
        json!({"functionCall": {"name": "look", "args": {"at": "it"}}})
    );
    // Both results answer their calls by name, in one user content; a
    // result that is not a JSON object is wrapped in one.
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(
        contents[2]["parts"],
        json!([
            {"functionResponse": {"name": "look", "response": {"seen": "a cat"}}},
            {"functionResponse": {"name": "smell", "response": {"content": "nothing"}}},
        ])
    );
    // Nothing set, nothing sent but the output limit the call's
    // reservation assumed (issue 33: without it Gemini writes up to the
    // model's own maximum, past the budget's reservation).
    let bare = request(
        &chat(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
        1_024,
    )
    .unwrap();
    assert_eq!(
        bare,
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
               "generationConfig": {"maxOutputTokens": 1_024}})
    );
}

#[test]
fn what_gemini_cannot_take_is_refused() {
    let orphan = chat(json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
    ]}));
    let e = request(&orphan, 1_024).unwrap_err();
    assert!(e.message.contains("\"nope\""), "{}", e.message);
    let url = chat(
        json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://e.com/x.png"}},
        ]}]}),
    );
    assert!(
        request(&url, 1_024)
            .unwrap_err()
            .message
            .contains("data: URLs")
    );
}

#[test]
fn the_answer_becomes_a_chat_completion() {
    let body = Bytes::from(json!({
        "candidates": [
            {"content": {"role": "model", "parts": [
                {"text": "thinking…", "thought": true},
                {"text": "Let me "}, {"text": "look."},
                {"functionCall": {"name": "look", "args": {"at": "it"}}},
            ]}, "finishReason": "STOP", "index": 0},
            {"content": {"role": "model", "parts": [{"text": "Cut"}]}, "finishReason": "MAX_TOKENS", "index": 1},
        ],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 6, "thoughtsTokenCount": 4, "totalTokenCount": 18},
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "resp-1",
    }).to_string());
    let a = answer(StatusCode::OK, &body, "gemini");
    assert_eq!(a.tool_calls, 1);
    let c: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(
        (c["id"].as_str(), c["model"].as_str()),
        (Some("resp-1"), Some("gemini-2.5-flash-001"))
    );
    let first = &c["choices"][0];
    assert_eq!(first["message"]["content"], "Let me look.");
    assert_eq!(first["finish_reason"], "tool_calls");
    assert_eq!(first["message"]["tool_calls"][0]["id"], "call_0");
    assert_eq!(
        first["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"at\":\"it\"}"
    );
    assert_eq!(c["choices"][1]["index"], 1);
    assert_eq!(c["choices"][1]["finish_reason"], "length");
    assert_eq!(
        c["usage"],
        json!({"prompt_tokens": 8, "completion_tokens": 10, "total_tokens": 18})
    );

    let blocked = Bytes::from_static(br#"{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}}"#);
    let c: Value = serde_json::from_slice(&answer(StatusCode::OK, &blocked, "g").body).unwrap();
    assert_eq!(c["choices"][0]["finish_reason"], "content_filter");
    assert!(c["choices"][0]["message"]["content"].is_null());
    for (reason, finish) in [
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("OTHER", "stop"),
    ] {
        let body = Bytes::from(json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}).to_string());
        let c: Value = serde_json::from_slice(&answer(StatusCode::OK, &body, "g").body).unwrap();
        assert_eq!(c["choices"][0]["finish_reason"], finish, "{reason}");
    }
}

#[test]
fn errors_become_openai_errors_naming_the_field() {
    let body = Bytes::from_static(br#"{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "contents[0]", "description": "bad"}]}]}}"#);
    let a = answer(StatusCode::BAD_REQUEST, &body, "g");
    let e: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["code"], "INVALID_ARGUMENT");
    assert_eq!(e["error"]["param"], "contents[0]");
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
}

const STREAM: &str = concat!(
    r#"data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1,"totalTokenCount":6},"modelVersion":"gemini-x","responseId":"r9"}"#,
    "\r\n\r\n",
    r#"data: {"candidates":[{"content":{"parts":[{"text":"lo"},{"functionCall":{"name":"f","args":{"q":1}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"totalTokenCount":9},"modelVersion":"gemini-x","responseId":"r9"}"#,
    "\r\n\r\n",
);

fn translate_stream(size: usize) -> Vec<Value> {
    let mut t = Translated::new(WireFormat::Gemini, Events::default(), true, "gemini");
    let chunks = run(&mut t, STREAM, size);
    assert_eq!(t.tool_calls(), 1);
    chunks
}

#[test]
fn the_stream_becomes_chat_chunks_however_it_is_cut() {
    let whole = translate_stream(STREAM.len());
    for size in [1, 5, 100] {
        let mut cut = translate_stream(size);
        for (a, b) in cut.iter_mut().zip(&whole) {
            a["created"] = b["created"].clone();
        }
        assert_eq!(cut, whole, "cut every {size} bytes");
    }
    let deltas: Vec<&Value> = whole.iter().map(|c| &c["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0]["role"], "assistant");
    assert_eq!(deltas[1], &json!({"content": "Hel"}));
    assert_eq!(deltas[2], &json!({"content": "lo"}));
    assert_eq!(
        deltas[3]["tool_calls"][0],
        json!({"index": 0, "id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{\"q\":1}"}})
    );
    // A call was made: the finish is `tool_calls`, not Gemini's STOP.
    assert_eq!(whole[4]["choices"][0]["finish_reason"], "tool_calls");
    assert!(
        whole
            .iter()
            .all(|c| c["id"] == "r9" && c["model"] == "gemini-x")
    );
    assert_eq!(
        whole[5]["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})
    );
    assert_eq!(whole.len(), 6);
}
