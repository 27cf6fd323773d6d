use serde_json::json;

use super::{Endpoint, Usage, from_body, is_stream, request_usage_in_stream, tool_calls};
use crate::WireFormat::{Anthropic, Gemini, Openai};

fn usage(prompt_tokens: u64, completion_tokens: u64, total_tokens: u64) -> Option<Usage> {
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens,
    })
}

const CHAT: &str = r#"{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4o-2024-08-06",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"a\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"b\"}"}}
      ],
      "refusal": null,
      "annotations": []
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}"#;

const EMBEDDINGS: &str = r#"{
  "object": "list",
  "data": [
    {"object": "embedding", "index": 0, "embedding": [0.0023064255, -0.009327292, -0.0028842222]},
    {"object": "embedding", "index": 1, "embedding": [0.0012, 0.5, -1e-5]}
  ],
  "model": "text-embedding-3-small",
  "usage": {"prompt_tokens": 8, "total_tokens": 8}
}"#;

const RESPONSES: &str = r#"{
  "id": "resp_67ccd2bed1ec8190b14f964abc054267",
  "object": "response",
  "created_at": 1741476542,
  "status": "completed",
  "model": "gpt-4.1-2025-04-14",
  "output": [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}", "status": "completed"},
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "In a peaceful grove...", "annotations": []}]}
  ],
  "usage": {
    "input_tokens": 36,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 87,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 123
  }
}"#;

const MESSAGES: &str = r#"{
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "Let me look that up."},
    {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"q": "a"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 2095,
    "cache_creation_input_tokens": 100,
    "cache_read_input_tokens": 1800,
    "output_tokens": 503,
    "service_tier": "standard"
  }
}"#;

#[test]
fn from_body_reads_each_kind_of_response() {
    let chat = from_body(Openai, Endpoint::Chat, CHAT.as_bytes());
    assert_eq!(chat, usage(1117, 46, 1163));
    let embeddings = from_body(Openai, Endpoint::Embeddings, EMBEDDINGS.as_bytes());
    assert_eq!(embeddings, usage(8, 0, 8));
    let responses = from_body(Openai, Endpoint::Responses, RESPONSES.as_bytes());
    assert_eq!(responses, usage(36, 87, 123));
    // Cache writes and reads count as input.
    let messages = from_body(Anthropic, Endpoint::Messages, MESSAGES.as_bytes());
    assert_eq!(messages, usage(3995, 503, 4498));
}

const GEMINI: &str = r#"{
  "candidates": [{
    "content": {"parts": [
      {"text": "Let me look that up."},
      {"functionCall": {"name": "lookup", "args": {"q": "a"}}},
      {"functionCall": {"name": "lookup", "args": {"q": "b"}}}
    ], "role": "model"},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {
    "promptTokenCount": 120,
    "cachedContentTokenCount": 100,
    "toolUsePromptTokenCount": 7,
    "candidatesTokenCount": 30,
    "thoughtsTokenCount": 45,
    "totalTokenCount": 202,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 120}]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "abc"
}"#;

#[test]
fn from_body_reads_gemini_usage_metadata() {
    // Cached tokens are inside the prompt count; tool-use prompts add to
    // it, thoughts to the output.
    let gemini = from_body(Gemini, Endpoint::Chat, GEMINI.as_bytes());
    assert_eq!(gemini, usage(127, 75, 202));
    // Without a total, the sum; without anything, none.
    let partial = br#"{"usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}}"#;
    assert_eq!(from_body(Gemini, Endpoint::Chat, partial), usage(4, 2, 6));
    assert_eq!(
        from_body(Gemini, Endpoint::Chat, br#"{"usageMetadata": {}}"#),
        None
    );
    assert_eq!(
        from_body(Gemini, Endpoint::Chat, br#"{"candidates": []}"#),
        None
    );
    // OpenAI's field names mean nothing in Gemini's format.
    assert_eq!(from_body(Gemini, Endpoint::Chat, CHAT.as_bytes()), None);
    assert_eq!(tool_calls(Gemini, GEMINI.as_bytes()), 2);
    assert_eq!(tool_calls(Gemini, CHAT.as_bytes()), 0);
}

#[test]
fn from_body_without_usage_or_json_is_none() {
    let chat = Endpoint::Chat;
    assert_eq!(from_body(Openai, chat, br#"{"choices": []}"#), None);
    assert_eq!(from_body(Openai, chat, br#"{"usage": null}"#), None);
    assert_eq!(from_body(Openai, chat, br#"{"usage": {}}"#), None);
    assert_eq!(
        from_body(Openai, chat, b"<html>502 Bad Gateway</html>"),
        None
    );
    assert_eq!(
        from_body(Openai, chat, br#"{"usage": {"prompt_tokens": -3}}"#),
        None
    );
    assert_eq!(from_body(Openai, chat, b""), None);
    // A missing total is the sum.
    let partial = br#"{"usage": {"prompt_tokens": 3, "completion_tokens": 4}}"#;
    assert_eq!(from_body(Openai, chat, partial), usage(3, 4, 7));
}

#[test]
fn tool_calls_counts_each_format() {
    assert_eq!(tool_calls(Openai, CHAT.as_bytes()), 2);
    assert_eq!(tool_calls(Openai, RESPONSES.as_bytes()), 1);
    assert_eq!(tool_calls(Anthropic, MESSAGES.as_bytes()), 1);
    assert_eq!(tool_calls(Openai, EMBEDDINGS.as_bytes()), 0);
    let legacy = br#"{"choices":[{"message":{"function_call":{"name":"f","arguments":"{}"},"tool_calls":null}}]}"#;
    assert_eq!(tool_calls(Openai, legacy), 1);
    assert_eq!(tool_calls(Anthropic, b"not json"), 0);
}

#[test]
fn request_usage_in_stream_when_the_client_did_not_ask() {
    let mut body = json!({"model": "m", "stream": true, "messages": []});
    assert!(!request_usage_in_stream(&mut body));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));

    let mut body = json!({"stream": true, "stream_options": {"include_usage": false, "x": 1}});
    assert!(!request_usage_in_stream(&mut body));
    assert_eq!(
        body["stream_options"],
        json!({"include_usage": true, "x": 1})
    );

    let mut body = json!({"stream": true, "stream_options": null});
    assert!(!request_usage_in_stream(&mut body));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn request_usage_in_stream_when_the_client_asked_itself() {
    let mut body = json!({"stream": true, "stream_options": {"include_usage": true}});
    assert!(request_usage_in_stream(&mut body));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn request_usage_in_stream_leaves_other_requests_alone() {
    for body in [
        json!({"stream": false}),
        json!({"messages": []}),
        json!("stream"),
    ] {
        let mut changed = body.clone();
        assert!(!request_usage_in_stream(&mut changed));
        assert_eq!(changed, body);
    }
}

#[test]
fn is_stream_only_for_stream_true() {
    assert!(is_stream(&json!({"stream": true})));
    assert!(!is_stream(&json!({"stream": false})));
    assert!(!is_stream(&json!({"stream": "true"})));
    assert!(!is_stream(&json!({})));
    assert!(!is_stream(&json!([true])));
}
