//! Gemini's `:embedContent` and `:batchEmbedContents` for clients, served
//! by an OpenAI-format provider's embeddings: each request's text becomes
//! one `input`, each vector one `embedding.values`. Gemini's own task
//! hints (`taskType`, `title`) have no counterpart there and are refused,
//! naming them.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// Most texts one call may embed (OpenAI's limit on `input`).
const MAX_REQUESTS: usize = 2_048;

/// The OpenAI embeddings body for a Gemini `body` to `model`: one
/// request's (`embedContent`) or each of `requests`
/// (`batchEmbedContents`).
pub(super) fn to_openai(
    model: &str,
    body: &Map<String, Value>,
    batch: bool,
) -> Result<Value, ApiError> {
    let requests: Vec<(String, &Map<String, Value>)> = if batch {
        let items = body
            .get("requests")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| ApiError::bad_field("requests", "must be a non-empty array"))?;
        if items.len() > MAX_REQUESTS {
            return Err(ApiError::bad_field(
                "requests",
                format!("at most {MAX_REQUESTS} requests"),
            ));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.as_object()
                    .map(|o| (format!("requests[{i}]."), o))
                    .ok_or_else(|| {
                        ApiError::bad_field(&format!("requests[{i}]"), "must be an object")
                    })
            })
            .collect::<Result<_, _>>()?
    } else {
        vec![(String::new(), body)]
    };
    let mut inputs = Vec::with_capacity(requests.len());
    let mut dimensions = None;
    for (at, r) in requests {
        for (key, v) in r {
            match key.as_str() {
                "content" | "model" | "outputDimensionality" => {}
                _ if v.is_null() => {}
                _ => {
                    return Err(ApiError::bad_field(
                        &format!("{at}{key}"),
                        "is not supported when an OpenAI-format model embeds",
                    ));
                }
            }
        }
        let parts = r
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                ApiError::bad_field(&format!("{at}content.parts"), "must be an array")
            })?;
        let mut text = Vec::with_capacity(parts.len());
        for (j, p) in parts.iter().enumerate() {
            text.push(p.get("text").and_then(Value::as_str).ok_or_else(|| {
                ApiError::bad_field(&format!("{at}content.parts[{j}].text"), "must be a string")
            })?);
        }
        inputs.push(text.join("\n"));
        if let Some(d) = r.get("outputDimensionality").filter(|d| !d.is_null()) {
            let d = d.as_u64().filter(|d| *d >= 1).ok_or_else(|| {
                ApiError::bad_field(
                    &format!("{at}outputDimensionality"),
                    "must be an integer of at least 1",
                )
            })?;
            if dimensions.is_some_and(|x| x != d) {
                return Err(ApiError::bad_field(
                    &format!("{at}outputDimensionality"),
                    "must be the same in every request",
                ));
            }
            dimensions = Some(d);
        }
    }
    let mut out = json!({"model": model, "input": inputs});
    if let Some(d) = dimensions {
        out["dimensions"] = json!(d);
    }
    Ok(out)
}

/// The Gemini answer for an OpenAI embeddings answer: `embedding` for
/// one request, `embeddings` for a batch; `None` when it is not one.
pub(super) fn from_openai(answer: &Value, batch: bool) -> Option<Value> {
    let mut data: Vec<&Value> = answer.get("data")?.as_array()?.iter().collect();
    data.sort_by_key(|d| d.get("index").and_then(Value::as_u64).unwrap_or(0));
    let values: Vec<Value> = data
        .iter()
        .map(|d| Some(json!({"values": d.get("embedding")?.as_array()?})))
        .collect::<Option<_>>()?;
    Some(if batch {
        json!({"embeddings": values})
    } else {
        json!({"embedding": values.into_iter().next()?})
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn requests_become_inputs_and_vectors_values() {
        let one = obj(json!({"content": {"parts": [{"text": "a"}, {"text": "b"}]},
            "outputDimensionality": 8}));
        assert_eq!(
            to_openai("openai/e", &one, false).unwrap(),
            json!({"model": "openai/e", "input": ["a\nb"], "dimensions": 8})
        );
        let batch = obj(json!({"requests": [
            {"model": "models/openai/e", "content": {"parts": [{"text": "x"}]}},
            {"content": {"parts": [{"text": "y"}]}},
        ]}));
        assert_eq!(
            to_openai("openai/e", &batch, true).unwrap()["input"],
            json!(["x", "y"])
        );
        let answer =
            json!({"data": [{"index": 1, "embedding": [2.0]}, {"index": 0, "embedding": [1.0]}]});
        assert_eq!(
            from_openai(&answer, true).unwrap(),
            json!({"embeddings": [{"values": [1.0]}, {"values": [2.0]}]})
        );
        let answer = json!({"data": [{"index": 0, "embedding": [1.0]}]});
        assert_eq!(
            from_openai(&answer, false).unwrap(),
            json!({"embedding": {"values": [1.0]}})
        );
    }

    #[test]
    fn what_cannot_be_sent_is_named() {
        let bad = |v: Value, batch| to_openai("m", &obj(v), batch).unwrap_err().to_string();
        let task = json!({"content": {"parts": [{"text": "a"}]}, "taskType": "X"});
        assert!(bad(task, false).contains("taskType"));
        assert!(bad(json!({"requests": []}), true).contains("requests"));
        let media = json!({"content": {"parts": [{"inlineData": {}}]}});
        assert!(bad(media, false).contains("content.parts[0].text"));
        let title = json!({"requests": [{"content": {"parts": [{"text": "a"}]}, "title": "t"}]});
        assert!(bad(title, true).contains("requests[0].title"));
    }
}
