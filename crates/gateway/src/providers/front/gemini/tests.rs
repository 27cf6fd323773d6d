use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::providers::fields::Format;
use crate::providers::translate;

fn chat(body: Value) -> Value {
    to_chat(&body, "gpt-4o-mini", "OpenAI", Format::Openai).unwrap()
}

fn refused(body: Value) -> (String, String) {
    let b = to_chat(&body, "claude-x", "Anthropic", Format::Anthropic).unwrap_err();
    (b.field, b.message)
}

fn base() -> Value {
    json!({"model": "openai/gpt-4o-mini", "stream": false,
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
}

#[test]
fn each_field_is_mapped() {
    let body = json!({
        "model": "openai/gpt-4o-mini",
        "stream": true,
        "alt": "sse",
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [
                {"text": "Look:"},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            ]},
            {"role": "model", "parts": [
                {"text": "Calling."},
                {"functionCall": {"name": "f", "args": {"a": 1}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"r": 42}}},
            ]},
        ],
        "generationConfig": {
            "maxOutputTokens": 50,
            "temperature": 0.2,
            "topP": 0.9,
            "stopSequences": ["END"],
            "candidateCount": 2,
            "seed": 7,
            "responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}},
        },
        "tools": [{"functionDeclarations": [{"name": "f", "description": "F.",
            "parameters": {"type": "OBJECT", "properties": {}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
        "labels": {"team": "a"},
    });
    let c = chat(body);
    assert_eq!(c["model"], "gpt-4o-mini");
    assert_eq!(c["max_tokens"], 50);
    assert_eq!(c["stop"], json!(["END"]));
    assert_eq!((c["n"].as_u64(), c["seed"].as_u64()), (Some(2), Some(7)));
    assert_eq!(c["stream"], true);
    assert_eq!(c["stream_options"]["include_usage"], true);
    assert_eq!(c["response_format"]["type"], "json_schema");
    assert_eq!(
        c["response_format"]["json_schema"]["schema"]["properties"]["a"]["type"],
        "string"
    );
    assert_eq!(c["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(c["tool_choice"]["function"]["name"], "f");
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        m[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(m[2]["content"], "Calling.");
    let id = m[2]["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
    // The response answers the call by its function's name.
    assert_eq!(m[3]["tool_call_id"], id);
    assert_eq!(m[3]["content"], "{\"r\":42}");
    let accepts = translate::Accepts {
        name: "Test",
        column: Format::Gemini,
    };
    let mut plain = c.clone();
    plain.as_object_mut().unwrap().remove("response_format");
    translate::parse(&plain, accepts).unwrap();
}

#[test]
fn absent_fields_stay_absent() {
    let c = chat(base());
    for f in [
        "stop",
        "temperature",
        "top_p",
        "stream",
        "tools",
        "tool_choice",
        "response_format",
        "max_tokens",
    ] {
        assert!(c.get(f).is_none(), "{f}");
    }
    let mut body = base();
    body["generationConfig"] = json!({"responseMimeType": "application/json"});
    assert_eq!(
        chat(body)["response_format"],
        json!({"type": "json_object"})
    );
}

#[test]
fn unsupported_fields_name_the_field_and_the_provider() {
    let cases = [
        (
            "safetySettings",
            json!([{"category": "x"}]),
            "safetySettings",
        ),
        ("cachedContent", json!("c"), "cachedContent"),
        (
            "generationConfig",
            json!({"topK": 5}),
            "generationConfig.topK",
        ),
        (
            "generationConfig",
            json!({"thinkingConfig": {}}),
            "generationConfig.thinkingConfig",
        ),
        (
            "generationConfig",
            json!({"responseModalities": ["IMAGE"]}),
            "generationConfig.responseModalities",
        ),
        (
            "tools",
            json!([{"googleSearch": {}}]),
            "tools[0].googleSearch",
        ),
    ];
    for (key, value, field) in cases {
        let mut body = base();
        body[key] = value;
        let (f, message) = refused(body);
        assert_eq!(f, field);
        assert!(message.contains("Anthropic"), "{message}");
    }
    let mut body = base();
    body["contents"][0]["parts"] = json!([{"fileData": {"fileUri": "gs://x"}}]);
    let (f, message) = refused(body);
    assert_eq!(f, "contents[0].parts[0]");
    assert!(
        message.contains("fileData") && message.contains("Anthropic"),
        "{message}"
    );
}

#[test]
fn malformed_fields_are_named() {
    let mut body = base();
    body["contents"] = json!([]);
    assert_eq!(refused(body).0, "contents");
    let mut body = base();
    body["contents"][0]["role"] = json!("system");
    assert_eq!(refused(body).0, "contents[0].role");
    let mut body = base();
    body["contents"] =
        json!([{"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {}}}]}]);
    assert_eq!(
        refused(body).0,
        "contents[0].parts[0].functionResponse.name"
    );
    let mut body = base();
    body["generationConfig"] = json!({"maxOutputTokens": 0});
    assert_eq!(refused(body).0, "generationConfig.maxOutputTokens");
}

#[test]
fn the_carried_fields_stay_out_of_the_native_body() {
    let map = json!({"contents": [], "generationConfig": {"temperature": 0}});
    let carried = carried(map.as_object().unwrap().clone(), "google/g", true, false);
    assert!(array_stream(&carried));
    let n = native(&carried, 99);
    assert_eq!(
        n,
        json!({"contents": [], "generationConfig": {"temperature": 0, "maxOutputTokens": 99}})
    );
    let sse = super::carried(serde_json::Map::new(), "g", true, true);
    assert!(!array_stream(&sse));
}

fn openai_answer(status: StatusCode, body: Value) -> Answer {
    Answer {
        status,
        body: Bytes::from(body.to_string()),
        usage: Some(sluice_usage::Usage {
            prompt_tokens: 12,
            completion_tokens: 5,
            total_tokens: 17,
        }),
        tool_calls: 1,
        details: sluice_usage::Details::default(),
    }
}

#[test]
fn an_answer_becomes_a_generate_content_response() {
    let body = json!({"id": "chatcmpl-1", "model": "gpt-4o-mini", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Sure.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
        "finish_reason": "tool_calls"}]});
    let a = answer(openai_answer(StatusCode::OK, body), "gpt-4o-mini");
    let r: Value = serde_json::from_slice(&a.body).unwrap();
    let c = &r["candidates"][0];
    assert_eq!(c["content"]["role"], "model");
    assert_eq!(c["content"]["parts"][0], json!({"text": "Sure."}));
    assert_eq!(
        c["content"]["parts"][1]["functionCall"]["args"],
        json!({"a": 1})
    );
    assert_eq!(c["finishReason"], "STOP");
    assert_eq!(r["usageMetadata"]["promptTokenCount"], 12);
    assert_eq!(r["usageMetadata"]["candidatesTokenCount"], 5);
    assert_eq!(r["usageMetadata"]["totalTokenCount"], 17);
    let body = json!({"error": {"message": "slow down"}});
    let a = answer(openai_answer(StatusCode::TOO_MANY_REQUESTS, body), "m");
    let r: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(r["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(r["error"]["code"], 429);
}
