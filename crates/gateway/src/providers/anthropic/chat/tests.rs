use bytes::Bytes;
use serde_json::{Value, json};
use sluice_usage::WireFormat;

use super::*;
use crate::providers::StreamReader;
use crate::providers::translate::{Translated, parse, run};

fn chat(body: Value) -> Chat {
    parse(&body, ACCEPTS).unwrap()
}

#[test]
fn the_request_becomes_a_messages_request() {
    let c = chat(json!({
        "model": "anthropic/claude",
        "messages": [
            {"role": "system", "content": "One."},
            {"role": "system", "content": "Two."},
            {"role": "user", "content": [
                {"type": "text", "text": "Hi"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
            ]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{\"q\":1}"}},
                {"id": "t2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "t1", "content": "a"},
            {"role": "tool", "tool_call_id": "t2", "content": "b"},
            {"role": "user", "content": "Thanks"},
        ],
        "stop": ["X", "Y"],
        "temperature": 0.3,
        "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "user": "u",
        "stream": true,
    }));
    let r = request(&c, "claude").unwrap();
    assert_eq!(r["model"], "claude");
    assert_eq!(r["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(r["system"], "One.\n\nTwo.");
    assert_eq!(r["stop_sequences"], json!(["X", "Y"]));
    assert_eq!(r["temperature"], 0.3);
    assert_eq!(r["stream"], true);
    assert_eq!(r["metadata"]["user_id"], "u");
    assert_eq!(
        r["tools"][0],
        json!({"name": "f", "description": "d", "input_schema": {"type": "object"}})
    );
    assert_eq!(
        r["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let m = r["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/jpeg", "data": "QUJD"})
    );
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(
        m[1]["content"][0],
        json!({"type": "text", "text": "Checking."})
    );
    assert_eq!(
        m[1]["content"][1],
        json!({"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}})
    );
    // Both results and the next user text in one user message, results first.
    assert_eq!(m[2]["role"], "user");
    let kinds: Vec<&str> = m[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "text"]);
    assert_eq!(m[2]["content"][1]["tool_use_id"], "t2");
}

#[test]
fn the_answer_becomes_a_chat_completion() {
    let body = Bytes::from(
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "a"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7},
        })
        .to_string(),
    );
    let a = answer(StatusCode::OK, &body, "claude");
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.tool_calls, 1);
    let c: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["id"], "msg_1");
    assert_eq!(c["model"], "claude-x");
    let choice = &c["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Let me look.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "toolu_1");
    assert_eq!(call["function"]["name"], "f");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"q": "a"}));
    // Cache reads count as prompt.
    assert_eq!(
        c["usage"],
        json!({"prompt_tokens": 15, "completion_tokens": 7, "total_tokens": 22})
    );

    for (stop, finish) in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
    ] {
        let body = Bytes::from(json!({"content": [], "stop_reason": stop}).to_string());
        let c: Value = serde_json::from_slice(&answer(StatusCode::OK, &body, "m").body).unwrap();
        assert_eq!(c["choices"][0]["finish_reason"], finish);
        assert!(c["choices"][0]["message"]["content"].is_null());
    }
}

#[test]
fn errors_become_openai_errors() {
    let body = Bytes::from_static(
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let a = answer(StatusCode::from_u16(529).unwrap(), &body, "m");
    assert_eq!(a.status.as_u16(), 529);
    let e: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(e["error"]["message"], "Overloaded");
    assert_eq!(e["error"]["code"], "overloaded_error");
    assert_eq!(e["error"]["type"], "server_error");
    let a = answer(StatusCode::OK, &Bytes::from_static(b"<html>oops"), "m");
    assert_eq!(a.status, StatusCode::BAD_GATEWAY);
}

const STREAM: &str = concat!(
    "event: message_start\n",
    r#"data: {"type":"message_start","message":{"id":"msg_9","model":"claude-x","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}"#,
    "\n\nevent: content_block_start\n",
    r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    "\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
    "\n\nevent: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#,
    "\n\nevent: content_block_start\n",
    r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}"#,
    "\n\nevent: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}"#,
    "\n\nevent: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
    "\n\nevent: message_delta\n",
    r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
    "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// The chunks a translated stream sends, fed `size` bytes at a time.
fn translate_stream(size: usize, include_usage: bool) -> Vec<Value> {
    let mut t = Translated::new(
        WireFormat::Anthropic,
        Events::default(),
        include_usage,
        "claude",
    );
    let chunks = run(&mut t, STREAM, size);
    assert_eq!(t.tool_calls(), 1);
    assert_eq!(t.usage().map(|u| u.total_tokens), Some(21));
    chunks
}

#[test]
fn the_stream_becomes_chat_chunks_however_it_is_cut() {
    let whole = translate_stream(STREAM.len(), true);
    for size in [1, 7, 64] {
        let mut cut = translate_stream(size, true);
        // Only `created` may differ between runs.
        for (a, b) in cut.iter_mut().zip(&whole) {
            a["created"] = b["created"].clone();
        }
        assert_eq!(cut, whole, "cut every {size} bytes");
    }
    let deltas: Vec<&Value> = whole.iter().map(|c| &c["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[1], &json!({"content": "Hel"}));
    assert_eq!(deltas[2], &json!({"content": "lo"}));
    assert_eq!(
        deltas[3]["tool_calls"][0],
        json!({"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": ""}})
    );
    assert_eq!(
        deltas[4]["tool_calls"][0]["function"]["arguments"],
        "{\"q\":"
    );
    assert_eq!(deltas[5]["tool_calls"][0]["function"]["arguments"], "1}");
    assert_eq!(whole[6]["choices"][0]["finish_reason"], "tool_calls");
    assert!(
        whole
            .iter()
            .all(|c| c["id"] == "msg_9" && c["model"] == "claude-x")
    );
    let last = whole.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21})
    );
    assert_eq!(whole.len(), 8);

    let without = translate_stream(STREAM.len(), false);
    assert_eq!(without.len(), 7);
    assert!(without.iter().all(|c| c.get("usage").is_none()));
}

#[test]
fn an_error_event_becomes_an_openai_error_in_the_stream() {
    let mut t = Translated::new(WireFormat::Anthropic, Events::default(), false, "claude");
    let event = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let out = t.feed(Bytes::from_static(event.as_bytes()));
    let text = std::str::from_utf8(&out).unwrap();
    let e: Value = serde_json::from_str(text.trim().strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(e["error"]["code"], "overloaded_error");
    assert_eq!(e["error"]["message"], "Overloaded");
}
