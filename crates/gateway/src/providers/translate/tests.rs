use serde_json::{Value, json};

use super::*;

use crate::providers::fields::Format;

/// A provider that takes every translated field (Gemini's column).
const ANY: Accepts = Accepts {
    name: "Test",
    column: Format::Gemini,
};

/// One that refuses some (Anthropic's column).
const STRICT: Accepts = Accepts {
    name: "Strict",
    column: Format::Anthropic,
};

fn field(body: Value, accepts: Accepts) -> String {
    parse(&body, accepts).unwrap_err().field
}

#[test]
fn a_full_request_is_read() {
    let body = json!({
        "model": "x/y",
        "messages": [
            {"role": "system", "content": "A."},
            {"role": "developer", "content": [{"type": "text", "text": "B."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}},
            ]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
        "max_tokens": 10,
        "max_completion_tokens": 20,
        "stop": "END",
        "temperature": 0.5,
        "n": 2,
        "seed": 3,
        "response_format": {"type": "json_object"},
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": false,
        "stream": true,
        "stream_options": {"include_usage": true},
        "logprobs": false,
        "user": "u1",
        "store": false,
    });
    let chat = parse(&body, ANY).unwrap();
    assert_eq!(chat.system, ["A.", "B."]);
    // max_completion_tokens wins over the legacy max_tokens.
    assert_eq!(chat.max_tokens, Some(20));
    assert_eq!(chat.stop, ["END"]);
    assert_eq!((chat.n, chat.seed, chat.json_mode), (2, Some(3), true));
    assert!(chat.stream && chat.include_usage && chat.no_parallel_tools);
    assert_eq!(chat.user.as_deref(), Some("u1"));
    assert_eq!(chat.tool_choice, Some(ToolChoice::Function("f".into())));
    // A tool without parameters takes an empty object.
    assert_eq!(chat.tools[0].parameters["type"], "object");
    assert_eq!(
        chat.turns[0],
        Turn::User(vec![
            Part::Text("Look:".into()),
            Part::Inline {
                media_type: "image/png".into(),
                data: "AAAA".into()
            },
            Part::Url("https://e.com/a.png".into()),
        ])
    );
    assert_eq!(
        chat.turns[1],
        Turn::Assistant {
            text: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: json!({"a": 1}),
            }],
        }
    );
    assert_eq!(
        chat.turns[2],
        Turn::Tool {
            call_id: "c1".into(),
            content: "done".into()
        }
    );
}

#[test]
fn bad_and_untranslatable_fields_are_named() {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let with = |extra: Value| {
        let mut b = json!({"model": "m", "messages": msgs});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    for (body, accepts, expected) in [
        (with(json!({"n": 2})), STRICT, "n"),
        (with(json!({"seed": 1})), STRICT, "seed"),
        (
            with(json!({"presence_penalty": 1.0})),
            STRICT,
            "presence_penalty",
        ),
        (
            with(json!({"response_format": {"type": "xml"}})),
            STRICT,
            "response_format.type",
        ),
        (
            with(json!({"response_format": {"type": "json_schema"}})),
            ANY,
            "response_format.json_schema.name",
        ),
        (
            with(json!({"response_format": {"type": "json_schema",
                "json_schema": {"name": "a", "schema": "no"}}})),
            ANY,
            "response_format.json_schema.schema",
        ),
        (with(json!({"logprobs": true})), ANY, "logprobs"),
        (with(json!({"functions": []})), ANY, "functions"),
        (with(json!({"max_tokens": 0})), ANY, "max_tokens"),
        (with(json!({"temperature": "hot"})), ANY, "temperature"),
        (with(json!({"stop": [1]})), ANY, "stop"),
        (with(json!({"stream": "yes"})), ANY, "stream"),
        (
            with(json!({"stream_options": {"include_usage": 1}})),
            ANY,
            "stream_options.include_usage",
        ),
        (
            with(json!({"tool_choice": "sometimes"})),
            ANY,
            "tool_choice",
        ),
        (
            with(json!({"tools": [{"type": "function", "function": {}}]})),
            ANY,
            "tools[0].function.name",
        ),
        (with(json!({"messages": []})), ANY, "messages"),
        (
            with(json!({"messages": [{"content": "x"}]})),
            ANY,
            "messages[0].role",
        ),
        (
            with(json!({"messages": [{"role": "user", "content": 3}]})),
            ANY,
            "messages[0].content",
        ),
        (
            with(json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})),
            ANY,
            "messages[0].content[0].type",
        ),
        (
            with(
                json!({"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]}),
            ),
            ANY,
            "messages[0].content",
        ),
        (
            with(
                json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}]}),
            ),
            ANY,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            with(json!({"messages": [{"role": "tool", "content": "x"}]})),
            ANY,
            "messages[0].tool_call_id",
        ),
    ] {
        assert_eq!(field(body.clone(), accepts), expected, "{body}");
    }
    let e = parse(&with(json!({"logit_bias": {}})), STRICT).unwrap_err();
    assert!(e.message.contains("Strict models"), "{}", e.message);
}

#[test]
fn errors_take_openai_s_shape() {
    let body = error_body(
        StatusCode::TOO_MANY_REQUESTS,
        "slow down",
        Some("rate_limit_error"),
        None,
    );
    let e: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(e["error"]["type"], "rate_limit_error");
    assert_eq!(e["error"]["code"], "rate_limit_error");
    assert_eq!(e["error"]["message"], "slow down");
    let body = unreadable(StatusCode::OK, "Gemini", b"<html>");
    let e: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(e["error"]["type"], "server_error");
    assert!(e["error"]["message"].as_str().unwrap().contains("<html>"));
}
