use serde_json::{Value, json};

use super::{
    Estimate, MEDIA_PART_TOKENS as MEDIA, MESSAGE_OVERHEAD_TOKENS as MSG,
    REQUEST_OVERHEAD_TOKENS as REQ, estimate,
};
use crate::Endpoint::{self, Chat, Embeddings, Messages, Responses};
use crate::WireFormat::{self, Anthropic, Gemini, Openai};

const DEFAULT: u64 = 1_000;

fn est(format: WireFormat, endpoint: Endpoint, body: Value) -> Estimate {
    estimate(format, endpoint, &body, 4, DEFAULT)
}

fn expect(prompt_tokens: u64, max_completion_tokens: u64) -> Estimate {
    Estimate {
        prompt_tokens,
        max_completion_tokens,
        total: prompt_tokens + max_completion_tokens,
    }
}

#[test]
fn chat_string_contents_with_max_tokens() {
    let body = json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},   // 14 chars
            {"role": "user", "content": "Hello there"},        // 11 chars
        ],
        "max_tokens": 100,
    });
    // 25 chars / 4 → 7 (rounded up).
    assert_eq!(est(Openai, Chat, body), expect(7 + REQ + 2 * MSG, 100));
}

#[test]
fn chat_array_parts_count_text_and_a_flat_figure_per_image() {
    let image = format!("data:image/png;base64,{}", "A".repeat(100_000));
    let body = json!({
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},   // 13 chars
            {"type": "image_url", "image_url": {"url": image, "detail": "high"}},
        ]}],
        "max_completion_tokens": 50,
    });
    assert_eq!(est(Openai, Chat, body), expect(4 + MEDIA + REQ + MSG, 50));
}

#[test]
fn chat_without_max_tokens_reserves_the_default_times_n() {
    let body = json!({"messages": [{"role": "user", "content": "abcd"}]});
    assert_eq!(est(Openai, Chat, body), expect(1 + REQ + MSG, DEFAULT));
    let body = json!({"messages": [], "n": 3, "max_tokens": 10, "max_completion_tokens": 20});
    // `max_completion_tokens` wins over the deprecated `max_tokens`.
    assert_eq!(est(Openai, Chat, body), expect(REQ, 60));
}

#[test]
fn chat_counts_tool_definitions_and_tool_calls_but_not_ids() {
    let tools = json!([{"type": "function", "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }}]);
    let tools_chars = tools.to_string().chars().count() as u64;
    let body = json!({
        "messages": [
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_0123456789", "type": "function",
                "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"},  // 6 + 9 chars
            }]},
            {"role": "tool", "tool_call_id": "call_0123456789", "content": "found"}, // 5 chars
        ],
        "tools": tools,
        "max_tokens": 1,
    });
    let prompt = (tools_chars + 20).div_ceil(4) + REQ + 2 * MSG;
    assert_eq!(est(Openai, Chat, body), expect(prompt, 1));
}

#[test]
fn anthropic_counts_system_blocks_tool_use_and_tool_results() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}], // 9
        "messages": [
            {"role": "user", "content": "Look up x"},                                          // 9
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "ok", "signature": "c2lnbmF0dXJlIGJ5dGVz"},   // 2
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},  // 6 + 9
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "found"}]}, // 5
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ]},
        ],
        "max_tokens": 512,
    });
    let prompt = 40u64.div_ceil(4) + MEDIA + REQ + 3 * MSG;
    assert_eq!(est(Anthropic, Messages, body), expect(prompt, 512));
}

#[test]
fn anthropic_without_max_tokens_reserves_the_default() {
    let body = json!({"system": "abcdefgh", "messages": [{"role": "user", "content": "abcd"}]});
    assert_eq!(
        est(Anthropic, Messages, body),
        expect(3 + REQ + MSG, DEFAULT)
    );
}

#[test]
fn responses_string_input_and_instructions() {
    let body = json!({"input": "abcdefgh", "instructions": "abcd", "max_output_tokens": 64});
    assert_eq!(est(Openai, Responses, body), expect(3 + REQ + MSG, 64));
}

#[test]
fn responses_array_input_items_without_max_output_tokens() {
    let body = json!({"input": [
        {"role": "user", "content": [
            {"type": "input_text", "text": "abcd"},
            {"type": "input_image", "image_url": "https://example.invalid/cat.png"},
        ]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},   // 3
        {"type": "function_call_output", "call_id": "call_1", "output": "12345"},        // 5
        "abcd",
    ]});
    let prompt = 16u64.div_ceil(4) + MEDIA + REQ + 4 * MSG;
    assert_eq!(est(Openai, Responses, body), expect(prompt, DEFAULT));
}

#[test]
fn embeddings_count_strings_and_token_ids_without_completion() {
    let body = json!({"input": "abcdefghi", "max_tokens": 10});
    assert_eq!(est(Openai, Embeddings, body), expect(3, 0));
    let body = json!({"input": ["ab", "cdef"]});
    assert_eq!(est(Openai, Embeddings, body), expect(2, 0));
    let body = json!({"input": [1, 2, 3]});
    assert_eq!(est(Openai, Embeddings, body), expect(3, 0));
    let body = json!({"input": [[1, 2], [3]]});
    assert_eq!(est(Openai, Embeddings, body), expect(3, 0));
}

#[test]
fn characters_not_bytes_and_a_zero_ratio_counts_as_one() {
    let body = json!({"messages": [{"role": "user", "content": "héllo wörld ✓"}], "max_tokens": 0});
    assert_eq!(
        estimate(Openai, Chat, &body, 0, DEFAULT),
        expect(13 + REQ + MSG, 0)
    );
    assert_eq!(
        estimate(Openai, Chat, &body, 1, DEFAULT),
        expect(13 + REQ + MSG, 0)
    );
}

#[test]
fn legacy_prompt_and_odd_bodies() {
    let body = json!({"prompt": ["abcd", "efgh"], "max_tokens": 5});
    assert_eq!(est(Openai, Chat, body), expect(2 + REQ, 5));
    // Not what an API accepts, but never a panic: overheads and the default.
    assert_eq!(est(Openai, Chat, json!([1, 2])), expect(REQ, DEFAULT));
    assert_eq!(
        est(
            Anthropic,
            Messages,
            json!({"max_tokens": -1, "messages": 7})
        ),
        expect(REQ, DEFAULT)
    );
    let huge = json!({"messages": [], "max_tokens": u64::MAX, "n": 1000});
    assert_eq!(est(Openai, Chat, huge).total, u64::MAX);
}

#[test]
fn gemini_contents_system_instruction_and_generation_config() {
    let image = "A".repeat(100_000);
    let body = json!({
        "systemInstruction": {"parts": [{"text": "Be terse."}]},          // 9 chars
        "contents": [
            {"role": "user", "parts": [
                {"text": "Describe this"},                                 // 13 chars
                {"inlineData": {"mimeType": "image/png", "data": image}},
            ]},
        ],
        "generationConfig": {"maxOutputTokens": 64, "candidateCount": 2},
    });
    // 22 chars / 4 → 6; one content item; the image at the flat figure.
    assert_eq!(est(Gemini, Chat, body), expect(6 + REQ + MSG + MEDIA, 128));
    let bare = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
    assert_eq!(est(Gemini, Chat, bare), expect(1 + REQ + MSG, DEFAULT));
}
