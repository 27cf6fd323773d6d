//! Google Gemini's native shapes: `generateContent` (a whole
//! `GenerateContentResponse`), `streamGenerateContent` (one response per
//! token, as SSE with `alt=sse` or else as one JSON array), and the model
//! list.

use bytes::Bytes;
use serde_json::{Value, json};

use super::Reply;

fn finish_reason(r: &Reply) -> &'static str {
    if r.truncated { "MAX_TOKENS" } else { "STOP" }
}

/// `usageMetadata` after `completion` tokens: every chunk of a stream
/// carries the counts so far, the last one the whole.
/// Thoughts and cached content are reported only when there are some, as
/// Gemini does.
fn usage(r: &Reply, completion: u64) -> Value {
    let thoughts = r.reasoning_of(completion);
    let mut u = json!({
        "promptTokenCount": r.prompt_tokens,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": r.prompt_tokens + completion,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": r.prompt_tokens}],
    });
    if thoughts > 0 {
        u["thoughtsTokenCount"] = json!(thoughts);
    }
    if r.cached_tokens() > 0 {
        u["cachedContentTokenCount"] = json!(r.cached_tokens());
    }
    u
}

fn response(r: &Reply, text: &str, finish: Option<&str>, completion: u64) -> Value {
    let part = match &r.tool {
        Some(call) => json!({"functionCall": {"name": call.name, "args": call.arguments}}),
        None => json!({"text": text}),
    };
    let mut candidate = json!({
        "content": {"parts": [part], "role": "model"},
        "index": 0,
    });
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": usage(r, completion),
        "modelVersion": r.model,
        "responseId": r.id,
    })
}

/// A whole `GenerateContentResponse`.
pub(crate) fn reply(r: &Reply) -> Value {
    response(r, &r.text(), Some(finish_reason(r)), r.completion_tokens())
}

/// The responses of a stream: one per token, the last with the finish
/// reason (an empty answer is one response with no text).
fn chunks(r: &Reply) -> Vec<Value> {
    let n = r.tokens.len();
    // Gemini sends a function call whole, in one response.
    if r.tool.is_some() {
        return vec![response(r, "", Some(finish_reason(r)), n as u64)];
    }
    if n == 0 {
        return vec![response(r, "", Some(finish_reason(r)), 0)];
    }
    r.tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let finish = (i + 1 == n).then(|| finish_reason(r));
            response(r, t, finish, i as u64 + 1)
        })
        .collect()
}

/// `streamGenerateContent?alt=sse`: `data:` events separated by `\r\n`, as
/// Google sends them; no `[DONE]`, the stream just ends.
pub(crate) fn sse_events(r: &Reply) -> Vec<(bool, Bytes)> {
    chunks(r)
        .into_iter()
        .map(|c| (true, Bytes::from(format!("data: {c}\r\n\r\n"))))
        .collect()
}

/// `streamGenerateContent` without `alt=sse`: one JSON array, its
/// elements written as they are generated.
pub(crate) fn array_events(r: &Reply) -> Vec<(bool, Bytes)> {
    let mut out: Vec<(bool, Bytes)> = chunks(r)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let sep = if i == 0 { "[" } else { ",\r\n" };
            (true, Bytes::from(format!("{sep}{c}")))
        })
        .collect();
    out.push((false, Bytes::from_static(b"]")));
    out
}

/// `GET /v1beta/models`.
pub(crate) fn models(list: &[(String, String)]) -> Value {
    let models: Vec<Value> = list
        .iter()
        .map(|(id, _)| {
            json!({
                "name": format!("models/{id}"),
                "displayName": id,
                "supportedGenerationMethods": ["generateContent", "streamGenerateContent"],
            })
        })
        .collect();
    json!({ "models": models })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(tokens: &[&str], truncated: bool) -> Reply {
        Reply {
            id: "r1".into(),
            model: "gemini-2.5-flash".into(),
            created: 0,
            prompt_tokens: 7,
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            truncated,
            include_usage: true,
            tool: None,
        }
    }

    #[test]
    fn a_stream_counts_up_and_ends_with_the_reason() {
        let events = sse_events(&reply(&["the ", "gate"], true));
        assert_eq!(events.len(), 2);
        let last = std::str::from_utf8(&events[1].1).unwrap();
        let json: Value =
            serde_json::from_str(last.trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(json["candidates"][0]["finishReason"], "MAX_TOKENS");
        assert_eq!(json["usageMetadata"]["candidatesTokenCount"], 2);
        assert_eq!(json["usageMetadata"]["totalTokenCount"], 9);
        assert!(last.ends_with("\r\n\r\n"));
    }

    #[test]
    fn the_array_form_is_one_json_array() {
        let events = array_events(&reply(&["a ", "b ", "c"], false));
        let whole: Vec<u8> = events.iter().flat_map(|(_, b)| b.to_vec()).collect();
        let json: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 3);
        assert_eq!(json[2]["candidates"][0]["finishReason"], "STOP");
        let empty = array_events(&reply(&[], false));
        let whole: Vec<u8> = empty.iter().flat_map(|(_, b)| b.to_vec()).collect();
        let json: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(json[0]["usageMetadata"]["candidatesTokenCount"], 0);
    }
}
