use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::providers::fields::Format;
use crate::providers::front::rewrite::Rewritten;
use crate::providers::{StreamReader, translate};

fn chat(body: Value) -> Value {
    to_chat(&body, "gpt-4o-mini", "OpenAI", Format::Openai).unwrap()
}

fn refused(body: Value) -> (String, String) {
    let b = to_chat(&body, "gpt-4o-mini", "Gemini", Format::Gemini).unwrap_err();
    (b.field, b.message)
}

fn base() -> Value {
    json!({"model": "openai/gpt-4o-mini", "max_tokens": 50,
        "messages": [{"role": "user", "content": "Hi"}]})
}

#[test]
fn each_field_is_mapped() {
    let body = json!({
        "model": "openai/gpt-4o-mini",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                    "content": [{"type": "text", "text": "boom"}]},
                {"type": "text", "text": "Go on."},
            ]},
        ],
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_p": 0.9,
        "stream": true,
        "tools": [{"name": "f", "description": "F.", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "metadata": {"user_id": "u1"},
        "service_tier": "auto",
    });
    let c = chat(body);
    assert_eq!(c["model"], "gpt-4o-mini");
    assert_eq!(c["max_tokens"], 50);
    assert_eq!(c["stop"], json!(["END"]));
    assert_eq!(
        (c["temperature"].as_f64(), c["top_p"].as_f64()),
        (Some(0.2), Some(0.9))
    );
    assert_eq!(c["stream"], true);
    assert_eq!(c["stream_options"]["include_usage"], true);
    assert_eq!(c["tool_choice"], "required");
    assert_eq!(c["parallel_tool_calls"], false);
    assert_eq!(c["user"], "u1");
    assert_eq!(c["tools"][0]["function"]["name"], "f");
    assert_eq!(
        c["tools"][0]["function"]["parameters"],
        json!({"type": "object"})
    );
    assert!(c.get("service_tier").is_none());
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        m[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(m[2]["content"], "Calling.");
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "t1", "content": "42"})
    );
    assert_eq!(m[4]["content"], "Error: boom");
    assert_eq!(m[5]["content"][0]["text"], "Go on.");
    // What the inner adapter reads it as: the OpenAI request parser takes it.
    let accepts = translate::Accepts {
        name: "Gemini",
        column: Format::Gemini,
    };
    translate::parse(&c, accepts).unwrap();
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
        "user",
    ] {
        assert!(c.get(f).is_none(), "{f}");
    }
    // A reasoning model's limit goes by its own name.
    let c = to_chat(&base(), "o3-mini", "OpenAI", Format::Openai).unwrap();
    assert_eq!(c["max_completion_tokens"], 50);
}

#[test]
fn unsupported_fields_name_the_field_and_the_provider() {
    let cases = [
        ("top_k", json!(5), "top_k"),
        (
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
            "thinking",
        ),
        ("container", json!("c"), "container"),
        ("metadata", json!({"other": 1}), "metadata.other"),
        (
            "tools",
            json!([{"type": "web_search_20250305", "name": "web_search"}]),
            "tools[0].type",
        ),
    ];
    for (key, value, field) in cases {
        let mut body = base();
        body[key] = value;
        let (f, message) = refused(body);
        assert_eq!(f, field);
        assert!(message.contains("Gemini"), "{message}");
    }
    let mut body = base();
    body["messages"][0]["content"] = json!([{"type": "document", "source": {}}]);
    let (f, message) = refused(body);
    assert_eq!(f, "messages[0].content[0].type");
    assert!(
        message.contains("\"document\"") && message.contains("Gemini"),
        "{message}"
    );
    // `thinking` off asks for nothing.
    let mut body = base();
    body["thinking"] = json!({"type": "disabled"});
    chat(body);
}

#[test]
fn malformed_fields_are_named() {
    let mut body = base();
    body.as_object_mut().unwrap().remove("max_tokens");
    assert_eq!(refused(body).0, "max_tokens");
    let mut body = base();
    body["messages"] = json!([]);
    assert_eq!(refused(body).0, "messages");
    let mut body = base();
    body["tool_choice"] = json!({"type": "sometimes"});
    assert_eq!(refused(body).0, "tool_choice.type");
    let mut body = base();
    body["messages"][0]["role"] = json!("system");
    assert_eq!(refused(body).0, "messages[0].role");
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
        details: sluice_usage::Details {
            cached_tokens: 2,
            reasoning_tokens: 0,
        },
    }
}

#[test]
fn an_answer_becomes_a_message() {
    let body = json!({"id": "chatcmpl-1", "model": "gpt-4o-mini", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Sure.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
        "finish_reason": "tool_calls"}]});
    let a = answer(openai_answer(StatusCode::OK, body), "gpt-4o-mini");
    let m: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(m["type"], "message");
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(m["content"][0], json!({"type": "text", "text": "Sure."}));
    assert_eq!(m["content"][1]["input"], json!({"a": 1}));
    assert_eq!(m["content"][1]["id"], "call_1");
    assert_eq!(m["usage"]["input_tokens"], 10);
    assert_eq!(m["usage"]["cache_read_input_tokens"], 2);
    assert_eq!(m["usage"]["output_tokens"], 5);
    // The provider's usage is kept for the ledger.
    assert_eq!(a.usage.unwrap().total_tokens, 17);
    for (finish, stop) in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
    ] {
        let body =
            json!({"id": "x", "choices": [{"message": {"content": "a"}, "finish_reason": finish}]});
        let m: Value =
            serde_json::from_slice(&answer(openai_answer(StatusCode::OK, body), "m").body).unwrap();
        assert_eq!(m["stop_reason"], stop);
    }
}

#[test]
fn an_error_keeps_its_status_in_anthropic_shape() {
    let body = json!({"error": {"message": "slow down", "type": "rate_limit_error"}});
    let a = answer(openai_answer(StatusCode::TOO_MANY_REQUESTS, body), "m");
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    let m: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(
        m,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    );
}

/// A reader that hands back what it is fed: an OpenAI stream as is.
struct Echo(Option<sluice_usage::Usage>);

impl StreamReader for Echo {
    fn feed(&mut self, chunk: Bytes) -> Bytes {
        chunk
    }
    fn finish(&mut self) -> Bytes {
        Bytes::new()
    }
    fn usage(&self) -> Option<sluice_usage::Usage> {
        self.0
    }
    fn details(&self) -> sluice_usage::Details {
        sluice_usage::Details::default()
    }
    fn tool_calls(&self) -> u32 {
        0
    }
    fn head(&self) -> sluice_usage::AnswerHead {
        sluice_usage::AnswerHead::default()
    }
    fn used_so_far(&self, _: u64, _: u64) -> Option<sluice_usage::Usage> {
        None
    }
    fn error_event(&self, _: &str, _: &str) -> Bytes {
        Bytes::new()
    }
}

/// The (event, data) pairs a stream of OpenAI chunks becomes, fed `size`
/// bytes at a time.
fn events_of(chunks: &[Value], size: usize) -> Vec<(String, Value)> {
    let usage = sluice_usage::Usage {
        prompt_tokens: 9,
        completion_tokens: 4,
        total_tokens: 13,
    };
    let mut reader = Rewritten::new(Box::new(Echo(Some(usage))), Writer::new("m"));
    let mut text = String::new();
    for c in chunks {
        text.push_str(&format!("data: {c}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    let mut out = Vec::new();
    for piece in text.as_bytes().chunks(size) {
        out.extend_from_slice(&reader.feed(Bytes::copy_from_slice(piece)));
    }
    out.extend_from_slice(&reader.finish());
    String::from_utf8(out)
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (event, data) = e.split_once('\n').unwrap();
            let event = event.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], event.as_str());
            (event, data)
        })
        .collect()
}

#[test]
fn a_stream_follows_anthropics_event_sequence() {
    let chunk = |delta: Value, finish: Value| json!({"id": "c1", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let chunks = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Let me "}), Value::Null),
        chunk(json!({"content": "look."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "c1", "model": "gpt-4o-mini", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}),
    ];
    for size in [1, 7, 10_000] {
        let events = events_of(&chunks, size);
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ],
            "fed {size} bytes at a time"
        );
        assert_eq!(events[0].1["message"]["model"], "gpt-4o-mini");
        assert_eq!(
            events[2].1["delta"],
            json!({"type": "text_delta", "text": "Let me "})
        );
        assert_eq!(events[5].1["index"], 1);
        assert_eq!(events[5].1["content_block"]["name"], "f");
        assert_eq!(events[6].1["delta"]["partial_json"], "{\"a\":");
        assert_eq!(events[9].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[9].1["usage"]["input_tokens"], 9);
        assert_eq!(events[9].1["usage"]["output_tokens"], 4);
    }
}
