//! OpenAI's legacy completions (`/v1/completions`) in front of an adapter
//! that translates OpenAI chat (Anthropic's, Gemini's, Azure's): the
//! `prompt` sent as one user message, the answer written back as a
//! `text_completion`, the stream as its chunks. OpenAI-format providers
//! take the call as it is (`providers/openai.rs`).

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value, json};
use sluice_usage::{Details, Endpoint, Usage, WireFormat};

use super::rewrite::Rewrite;
use crate::providers::translate::{now, usage_json};
use crate::providers::{Answer, BadField};

/// The fields another provider can take (as their chat counterparts);
/// any other with a value is refused, naming it: `suffix`, `echo`,
/// `logprobs` and `best_of` have no chat counterpart.
const FIELDS: &[&str] = &[
    "model",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "stream",
    "stream_options",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "user",
];

/// The OpenAI chat request for a completions `body`, to `model` (the
/// name sent upstream) at `provider`.
///
/// # Errors
/// The first field that is malformed, or that `provider` cannot take (a
/// 400 naming both).
pub(super) fn to_chat(body: &Value, model: &str, provider: &str) -> Result<Value, BadField> {
    let obj = body
        .as_object()
        .ok_or_else(|| BadField::new("body", "must be a JSON object"))?;
    for (key, value) in obj {
        if !value.is_null() && !FIELDS.contains(&key.as_str()) {
            return Err(BadField::new(
                key,
                format!("is not supported when calling {provider} models through /v1/completions"),
            ));
        }
    }
    let prompt = match obj.get("prompt") {
        Some(Value::String(s)) => s.as_str(),
        // One prompt in an array is the same call; several are several
        // completions in one request, which chat has no way to ask.
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items[0].as_str().unwrap_or_default()
        }
        Some(Value::Array(_)) => {
            return Err(BadField::new(
                "prompt",
                format!(
                    "must be one string when calling {provider} models (a batch of prompts or token ids cannot be translated)"
                ),
            ));
        }
        _ => return Err(BadField::new("prompt", "must be a string")),
    };
    let mut out = Map::new();
    for (key, value) in obj {
        if key != "prompt" && !value.is_null() {
            out.insert(key.clone(), value.clone());
        }
    }
    out.insert("model".into(), json!(model));
    out.insert(
        "messages".into(),
        json!([{"role": "user", "content": prompt}]),
    );
    Ok(Value::Object(out))
}

/// The inner adapter's OpenAI chat answer as a `text_completion` (errors
/// stay in OpenAI's shape, which is this API's too).
pub(super) fn answer(mut answer: Answer, model: &str) -> Answer {
    if !answer.status.is_success() {
        return answer;
    }
    let Ok(json) = serde_json::from_slice::<Value>(&answer.body) else {
        return answer;
    };
    let choices: Vec<Value> = json["choices"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            choice(
                i,
                c["message"]["content"].as_str().unwrap_or_default(),
                &c["finish_reason"],
            )
        })
        .collect();
    let mut body = json!({
        "id": format!("cmpl-{}", json["id"].as_str().unwrap_or("sluice")),
        "object": "text_completion",
        "created": now(),
        "model": json["model"].as_str().unwrap_or(model),
        "choices": choices,
    });
    if let Some(u) = answer.usage {
        body["usage"] = usage_json(u);
    }
    answer.body = Bytes::from(body.to_string());
    answer
}

/// One choice of a `text_completion`.
fn choice(index: usize, text: &str, finish: &Value) -> Value {
    json!({"text": text, "index": index, "logprobs": null, "finish_reason": finish})
}

/// An OpenAI chat stream rewritten, chunk by chunk, as completion chunks
/// (`object: text_completion`, `choices[].text`), then the usage chunk
/// when the client asked for it, then `[DONE]`.
pub(super) struct Chunks {
    model: String,
    wants_usage: bool,
}

impl Chunks {
    pub(super) fn new(model: &str, wants_usage: bool) -> Self {
        Self {
            model: model.to_owned(),
            wants_usage,
        }
    }

    fn put(out: &mut BytesMut, data: &Value) {
        out.put_slice(b"data: ");
        out.put_slice(data.to_string().as_bytes());
        out.put_slice(b"\n\n");
    }
}

impl Rewrite for Chunks {
    fn chunk(&mut self, data: &[u8], out: &mut BytesMut) {
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if chunk.get("error").is_some() {
            Self::put(out, &chunk);
            return;
        }
        if let Some(m) = chunk["model"].as_str() {
            m.clone_into(&mut self.model);
        }
        let choices: Vec<Value> = chunk["choices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let text = c["delta"]["content"].as_str().unwrap_or_default();
                let finish = &c["finish_reason"];
                let index = usize::try_from(c["index"].as_u64().unwrap_or(0)).ok()?;
                (!text.is_empty() || !finish.is_null()).then(|| choice(index, text, finish))
            })
            .collect();
        if choices.is_empty() {
            return;
        }
        let id = format!("cmpl-{}", chunk["id"].as_str().unwrap_or("sluice"));
        Self::put(
            out,
            &json!({"id": id, "object": "text_completion", "created": now(),
                "model": self.model, "choices": choices}),
        );
    }

    fn end(&mut self, usage: Option<Usage>, _details: Details, out: &mut BytesMut) {
        if let (true, Some(u)) = (self.wants_usage, usage) {
            Self::put(
                out,
                &json!({"id": "cmpl-sluice", "object": "text_completion", "created": now(),
                    "model": self.model, "choices": [], "usage": usage_json(u)}),
            );
        }
        out.put_slice(b"data: [DONE]\n\n");
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        sluice_usage::error_event(WireFormat::Openai, Endpoint::Completions, code, message)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use super::*;
    use crate::providers::front::rewrite::Rewritten;
    use crate::providers::{Exchange, Passthrough, StreamReader};

    #[test]
    fn the_prompt_becomes_one_user_message_and_what_chat_lacks_is_named() {
        let chat = to_chat(
            &json!({"model": "a/m", "prompt": "Say hi", "max_tokens": 5, "stop": ["\n"]}),
            "m",
            "Anthropic",
        )
        .unwrap();
        assert_eq!(
            chat,
            json!({"model": "m", "max_tokens": 5, "stop": ["\n"],
                "messages": [{"role": "user", "content": "Say hi"}]})
        );
        let one = to_chat(&json!({"model": "a/m", "prompt": ["x"]}), "m", "Gemini").unwrap();
        assert_eq!(one["messages"][0]["content"], "x");
        for (body, field) in [
            (
                json!({"model": "a/m", "prompt": "x", "suffix": "y"}),
                "suffix",
            ),
            (json!({"model": "a/m", "prompt": "x", "echo": true}), "echo"),
            (
                json!({"model": "a/m", "prompt": "x", "logprobs": 2}),
                "logprobs",
            ),
            (
                json!({"model": "a/m", "prompt": "x", "best_of": 2}),
                "best_of",
            ),
            (json!({"model": "a/m", "prompt": ["x", "y"]}), "prompt"),
            (json!({"model": "a/m", "prompt": [1, 2]}), "prompt"),
            (json!({"model": "a/m"}), "prompt"),
        ] {
            let err = to_chat(&body, "m", "Anthropic").unwrap_err();
            assert_eq!(err.field, field, "{body}");
        }
        let err = to_chat(
            &json!({"model": "a/m", "prompt": "x", "echo": true}),
            "m",
            "Anthropic",
        )
        .unwrap_err();
        assert!(err.message.contains("Anthropic"), "{}", err.message);
    }

    #[test]
    fn a_chat_answer_becomes_a_text_completion_with_the_providers_usage() {
        let body = json!({"id": "x1", "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "length"}]});
        let a = answer(
            Answer {
                status: StatusCode::OK,
                body: Bytes::from(body.to_string()),
                usage: Some(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 1,
                    total_tokens: 4,
                }),
                tool_calls: 0,
                details: Details::default(),
            },
            "m",
        );
        let out: Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(out["object"], "text_completion");
        assert_eq!(out["choices"][0]["text"], "Hello");
        assert_eq!(out["choices"][0]["finish_reason"], "length");
        assert_eq!(out["usage"]["total_tokens"], 4);
    }

    #[test]
    fn a_chat_stream_becomes_completion_chunks_ending_in_done() {
        let exchange = Exchange {
            endpoint: Endpoint::Chat,
            client_wants_usage: true,
            model: "m".into(),
            array_stream: false,
        };
        let inner = Box::new(Passthrough::new(WireFormat::Openai.dialect(), &exchange));
        let mut s = Rewritten::new(inner, Chunks::new("m", true));
        let chunk = |delta: Value, finish: Value| {
            format!(
                "data: {}\n\n",
                json!({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            )
        };
        let mut out = Vec::new();
        out.extend_from_slice(&s.feed(Bytes::from(chunk(
            json!({"role": "assistant"}),
            Value::Null,
        ))));
        out.extend_from_slice(&s.feed(Bytes::from(chunk(json!({"content": "Hi"}), Value::Null))));
        out.extend_from_slice(&s.feed(Bytes::from(chunk(json!({}), json!("stop")))));
        out.extend_from_slice(&s.feed(Bytes::from(format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}})
        ))));
        out.extend_from_slice(&s.finish());
        let text = String::from_utf8(out).unwrap();
        let events: Vec<Value> = text
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(events.len(), 3, "{text}");
        assert_eq!(events[0]["choices"][0]["text"], "Hi");
        assert_eq!(events[0]["object"], "text_completion");
        assert_eq!(events[1]["choices"][0]["finish_reason"], "stop");
        assert_eq!(events[2]["usage"]["total_tokens"], 3);
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert_eq!(s.usage().map(|u| u.total_tokens), Some(3));
    }
}
