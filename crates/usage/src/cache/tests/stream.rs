//! Streams: captured whole only when complete, replayed in the endpoint's
//! format, and a replay captured again is the stored answer.

use serde_json::{Value, json};

use crate::cache::{CaptureError, ReplayError, StreamCapture, replay_stream};
use crate::{Endpoint, StreamScanner, WireFormat};

const MAX: u64 = 1 << 20;

fn capture(endpoint: Endpoint, chunks: &[&[u8]]) -> Result<Value, CaptureError> {
    let mut capture = StreamCapture::new(endpoint, MAX);
    for chunk in chunks {
        capture.push(chunk);
    }
    let whole = capture.finish()?;
    Ok(serde_json::from_slice(&whole).expect("assembled JSON"))
}

fn byte_by_byte(endpoint: Endpoint, stream: &[u8]) -> Result<Value, CaptureError> {
    let chunks: Vec<&[u8]> = stream.chunks(1).collect();
    capture(endpoint, &chunks)
}

const CHAT_STREAM: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"is\"},\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{\\\"q\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"x\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\n",
    "data: [DONE]\n\n",
);

fn chat_whole() -> Value {
    json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Paris",
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    })
}

#[test]
fn a_chat_stream_is_assembled_whole() {
    assert_eq!(
        capture(Endpoint::Chat, &[CHAT_STREAM.as_bytes()]),
        Ok(chat_whole())
    );
    assert_eq!(
        byte_by_byte(Endpoint::Chat, CHAT_STREAM.as_bytes()),
        Ok(chat_whole())
    );
}

#[test]
fn a_half_stream_is_never_stored() {
    let cut = CHAT_STREAM.replace("data: [DONE]\n\n", "");
    assert_eq!(
        capture(Endpoint::Chat, &[cut.as_bytes()]),
        Err(CaptureError::Incomplete)
    );
    let half = &CHAT_STREAM[..CHAT_STREAM.len() / 2];
    assert_eq!(
        capture(Endpoint::Chat, &[half.as_bytes()]),
        Err(CaptureError::Incomplete)
    );
    let failed = "data: {\"error\":{\"message\":\"overloaded\"}}\n\ndata: [DONE]\n\n";
    assert_eq!(
        capture(Endpoint::Chat, &[failed.as_bytes()]),
        Err(CaptureError::Failed)
    );
    let junk = "data: {not json\n\ndata: [DONE]\n\n";
    assert_eq!(
        capture(Endpoint::Chat, &[junk.as_bytes()]),
        Err(CaptureError::Malformed(Endpoint::Chat))
    );
    let mut small = StreamCapture::new(Endpoint::Chat, 100);
    small.push(CHAT_STREAM.as_bytes());
    assert_eq!(small.finish(), Err(CaptureError::TooLarge(100)));
    assert_eq!(
        capture(Endpoint::Embeddings, &[]),
        Err(CaptureError::NotStreamed(Endpoint::Embeddings))
    );
}

/// The data of each event, `[DONE]` as a string.
fn events(stream: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(stream).expect("UTF-8");
    assert!(text.ends_with("\n\n"), "every event ends with a blank line");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("a data line");
            serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned()))
        })
        .collect()
}

#[test]
fn a_chat_replay_is_a_valid_stream_with_usage_when_asked() {
    let whole = serde_json::to_vec(&chat_whole()).expect("JSON");
    let stream = replay_stream(Endpoint::Chat, &whole, true).expect("replayable");
    let events = events(&stream);
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    let chunks = &events[..events.len() - 1];
    for chunk in chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], "c1");
    }
    let (last, rest) = chunks.split_last().expect("chunks");
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["total_tokens"], 13);
    assert!(rest.iter().all(|c| c["usage"].is_null()));
    // Replayed and captured again: the stored answer.
    assert_eq!(capture(Endpoint::Chat, &[&stream]), Ok(chat_whole()));

    // The usage the gateway's scanner reads from the replay is the stored one.
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, false);
    let _ = scanner.feed(stream);
    assert_eq!(scanner.usage().map(|u| u.total_tokens), Some(13));

    let without = replay_stream(Endpoint::Chat, &whole, false).expect("replayable");
    let events = self::events(&without);
    assert!(events.iter().all(|e| e.get("usage").is_none()));
    assert_eq!(events.last(), Some(&json!("[DONE]")));
}

const MESSAGES_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hmm.\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\" there\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu_1\",\"name\":\"get\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn message_whole() -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
            {"type": "text", "text": "Hello there"},
            {"type": "tool_use", "id": "tu_1", "name": "get", "input": {"city": "Paris"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 15}
    })
}

#[test]
fn an_anthropic_stream_is_assembled_and_replayed() {
    let stream = MESSAGES_STREAM.as_bytes();
    assert_eq!(capture(Endpoint::Messages, &[stream]), Ok(message_whole()));
    assert_eq!(
        byte_by_byte(Endpoint::Messages, stream),
        Ok(message_whole())
    );
    let cut = MESSAGES_STREAM.replace(
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        "",
    );
    assert_eq!(
        capture(Endpoint::Messages, &[cut.as_bytes()]),
        Err(CaptureError::Incomplete)
    );

    let whole = serde_json::to_vec(&message_whole()).expect("JSON");
    let replay = replay_stream(Endpoint::Messages, &whole, false).expect("replayable");
    let text = std::str::from_utf8(&replay).expect("UTF-8");
    assert!(text.starts_with("event: message_start\ndata: "));
    assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    assert_eq!(capture(Endpoint::Messages, &[&replay]), Ok(message_whole()));
    let mut scanner = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
    let _ = scanner.feed(replay);
    let usage = scanner.usage().expect("usage in the replay");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (25, 15));
}

#[test]
fn a_responses_stream_is_stored_from_its_completed_event() {
    let response = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o-mini",
        "output": [{"type": "message", "id": "m1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi!", "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}});
    let whole = serde_json::to_vec(&response).expect("JSON");
    let replay = replay_stream(Endpoint::Responses, &whole, false).expect("replayable");
    let events = events(&replay);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().expect("typed"))
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert!(kinds.contains(&"response.output_text.delta"));
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().expect("numbered"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(capture(Endpoint::Responses, &[&replay]), Ok(response));
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n";
    assert_eq!(
        capture(Endpoint::Responses, &[failed.as_bytes()]),
        Err(CaptureError::Failed)
    );
}

#[test]
fn what_cannot_be_replayed_says_why() {
    assert_eq!(
        replay_stream(Endpoint::Embeddings, b"{}", false),
        Err(ReplayError::NotStreamed(Endpoint::Embeddings))
    );
    assert_eq!(
        replay_stream(Endpoint::Chat, b"not json", false),
        Err(ReplayError::Malformed(Endpoint::Chat))
    );
    assert_eq!(
        replay_stream(Endpoint::Messages, br#"{"content": 3}"#, false),
        Err(ReplayError::Malformed(Endpoint::Messages))
    );
}
