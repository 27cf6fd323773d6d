//! JSON mode: a request that asks for JSON (OpenAI's `response_format`,
//! Anthropic's `output_format`, Gemini's
//! `generationConfig.responseMimeType`) is answered with a JSON
//! document: one that fits its schema (made as a tool call's arguments
//! are, whole), else `{"answer": "<the usual words>"}` (cut as text is). The
//! request's fields are checked as the providers check them.

use serde_json::{Map, Value};

use crate::state::Output;
use crate::wire::errors::Problem;

/// What JSON an answer must be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ask {
    /// Any JSON object.
    Object,
    /// A document that fits this schema.
    Schema(Value),
}

/// The tokens around an [`Ask::Object`]'s words: `{"answer": "` and `"}`.
const WRAPPING: u64 = 2;

impl Ask {
    /// How long its answer is, as the quota counts it.
    pub(crate) fn output(&self) -> Output {
        match self {
            Ask::Object => Output::Wrapped(WRAPPING),
            Ask::Schema(_) => Output::Exact(self.tokens(0, 0).len() as u64),
        }
    }

    /// The answer's tokens: `{"answer": "…"}` around `n` words of the
    /// prompt's (hash `seed`) text (`n` counting the wrapping, as
    /// [`Ask::output`] said), or a document made from the schema.
    pub(crate) fn tokens(&self, seed: u64, n: u64) -> Vec<String> {
        match self {
            Ask::Object => {
                let words = super::text::tokens(seed, n.saturating_sub(WRAPPING));
                let mut out = Vec::with_capacity(words.len() + 2);
                out.push("{\"answer\": \"".to_owned());
                // Each word as a JSON string's inside.
                out.extend(words.iter().map(|w| {
                    let quoted = Value::String(w.clone()).to_string();
                    quoted[1..quoted.len() - 1].to_owned()
                }));
                out.push("\"}".to_owned());
                out
            }
            Ask::Schema(schema) => {
                super::tools::pieces(&super::tools::value_for(schema, 0).to_string())
            }
        }
    }
}

/// OpenAI's `response_format`: `text`, `json_object`, or `json_schema`
/// with `json_schema.name` and `json_schema.schema`.
pub(crate) fn openai(body: &Map<String, Value>) -> Result<Option<Ask>, Problem> {
    let Some(format) = body.get("response_format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Ask::Object)),
        Some("json_schema") => {
            let spec = format
                .get("json_schema")
                .and_then(Value::as_object)
                .ok_or_else(|| Problem::bad("response_format.json_schema", "Field required"))?;
            if !spec.get("name").is_some_and(Value::is_string) {
                return Err(Problem::bad(
                    "response_format.json_schema.name",
                    "Field required",
                ));
            }
            match spec.get("schema") {
                Some(s @ Value::Object(_)) => Ok(Some(Ask::Schema(s.clone()))),
                None => Ok(Some(Ask::Object)),
                Some(_) => Err(Problem::bad(
                    "response_format.json_schema.schema",
                    "must be an object",
                )),
            }
        }
        _ => Err(Problem::bad(
            "response_format.type",
            "must be one of 'text', 'json_object', 'json_schema'",
        )),
    }
}

/// Anthropic's structured outputs: `output_format: {"type":
/// "json_schema", "schema"}`.
pub(crate) fn anthropic(body: &Map<String, Value>) -> Result<Option<Ask>, Problem> {
    let Some(format) = body.get("output_format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Err(Problem::bad("output_format.type", "must be 'json_schema'"));
    }
    match format.get("schema") {
        Some(s @ Value::Object(_)) => Ok(Some(Ask::Schema(s.clone()))),
        _ => Err(Problem::bad("output_format.schema", "Field required")),
    }
}

/// Gemini's `generationConfig.responseMimeType` (`text/plain` or
/// `application/json`), with `responseSchema` or `responseJsonSchema`.
pub(crate) fn gemini(body: &Map<String, Value>) -> Result<Option<Ask>, Problem> {
    let Some(config) = body.get("generationConfig").and_then(Value::as_object) else {
        return Ok(None);
    };
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
        .filter(|s| !s.is_null());
    match config.get("responseMimeType").and_then(Value::as_str) {
        None | Some("text/plain") if schema.is_none() => Ok(None),
        Some("application/json") => {
            Ok(Some(schema.map_or(Ask::Object, |s| Ask::Schema(s.clone()))))
        }
        Some("text/plain") | None => Err(Problem::bad(
            "generationConfig.responseSchema",
            "a schema needs responseMimeType \"application/json\"",
        )),
        Some(_) => Err(Problem::bad(
            "generationConfig.responseMimeType",
            "must be \"text/plain\" or \"application/json\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn json_is_asked_each_providers_way() {
        assert_eq!(openai(&obj(json!({}))).unwrap(), None);
        assert_eq!(
            openai(&obj(json!({"response_format": {"type": "json_object"}}))).unwrap(),
            Some(Ask::Object)
        );
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]});
        let ask = openai(&obj(json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "w", "schema": schema}}})))
        .unwrap()
        .unwrap();
        let doc: Value = serde_json::from_str(&ask.tokens(1, 9).concat()).unwrap();
        assert!(doc["city"].is_string(), "{doc}");
        assert_eq!(ask.output(), Output::Exact(ask.tokens(1, 9).len() as u64));
        let bad = openai(&obj(json!({"response_format": {"type": "xml"}}))).unwrap_err();
        assert!(format!("{bad:?}").contains("response_format.type"));
        let g = gemini(&obj(
            json!({"generationConfig": {"responseMimeType": "application/json"}}),
        ));
        let ask = g.unwrap().unwrap();
        let tokens = ask.tokens(7, 6);
        // Counted as the quota counts them: the words and the wrapping.
        assert_eq!(tokens.len(), 6);
        let doc: Value = serde_json::from_str(&tokens.concat()).unwrap();
        assert!(doc["answer"].is_string(), "{doc}");
        let bad = gemini(&obj(
            json!({"generationConfig": {"responseSchema": {"type": "OBJECT"}}}),
        ));
        assert!(format!("{:?}", bad.unwrap_err()).contains("responseSchema"));
    }
}
