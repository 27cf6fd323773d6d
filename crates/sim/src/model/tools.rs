//! Tool calls: a request that offers tools and ends on the user's turn is
//! answered with a call to one of them, its arguments made from the
//! tool's JSON schema; a request that ends on a tool's result is answered
//! with text. So an agent's loop (call, run the tool, send the result,
//! read the answer) runs against the sim in every format, streamed too.
//!
//! Which tool: the one `tool_choice` (`toolConfig` for Gemini) names, else
//! the first offered. None when the choice is `none` (`NONE`). The tools
//! offered are checked as the providers check them, each error naming its
//! field.

use serde_json::{Map, Value, json};

use crate::wire::errors::Problem;

/// Most tools one request may offer (OpenAI's limit).
const MAX_TOOLS: usize = 128;
/// How deep argument objects are made from a schema.
const MAX_DEPTH: usize = 4;

/// The call the sim answers with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Arguments made from its schema (a JSON object).
    pub arguments: Value,
}

impl ToolCall {
    /// The arguments as the JSON text OpenAI's shapes carry.
    pub(crate) fn arguments_json(&self) -> String {
        self.arguments.to_string()
    }

    /// The arguments' text in pieces of about a token (4 bytes), as a
    /// stream sends them and usage counts them.
    pub(crate) fn pieces(&self) -> Vec<String> {
        pieces(&self.arguments_json())
    }
}

/// `text` in pieces of about a token (4 bytes), as a stream sends them
/// and usage counts them.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    for c in text.chars() {
        piece.push(c);
        if piece.len() >= 4 {
            out.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// A tool offered: its name and its parameters' schema.
struct Offered<'a> {
    name: &'a str,
    schema: Option<&'a Value>,
}

fn bad(field: impl Into<String>, message: &str) -> Problem {
    Problem::bad(field, message)
}

fn name_of(v: Option<&Value>, field: String) -> Result<&str, Problem> {
    match v {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => Ok(s),
        Some(Value::String(_)) => Err(bad(field, "must be 1 to 64 characters")),
        Some(_) => Err(bad(field, "must be a string")),
        None => Err(bad(field, "Field required")),
    }
}

fn list<'a>(body: &'a Map<String, Value>, field: &str) -> Result<Option<&'a Vec<Value>>, Problem> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if a.len() > MAX_TOOLS => {
            Err(bad(field, &format!("must have at most {MAX_TOOLS} items")))
        }
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(bad(field, "must be an array")),
    }
}

/// OpenAI's chat: `tools` of `{"type": "function", "function": {"name",
/// "parameters"}}`, `tool_choice` `"none" | "auto" | "required" |
/// {"type": "function", "function": {"name"}}`; the last message's role
/// says whose turn it is.
pub(crate) fn openai(body: &Map<String, Value>) -> Result<Option<ToolCall>, Problem> {
    let Some(tools) = list(body, "tools")? else {
        return Ok(None);
    };
    let mut offered = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let field = format!("tools[{i}]");
        let t = t
            .as_object()
            .ok_or_else(|| bad(&field, "must be an object"))?;
        match t.get("type") {
            Some(Value::String(k)) if k == "function" => {}
            _ => return Err(bad(format!("{field}.type"), "must be \"function\"")),
        }
        let f = t
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(format!("{field}.function"), "must be an object"))?;
        offered.push(Offered {
            name: name_of(f.get("name"), format!("{field}.function.name"))?,
            schema: f.get("parameters"),
        });
    }
    let chosen = match body.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(Value::String(s)) if s == "auto" || s == "required" => None,
        Some(Value::Object(c)) => Some(name_of(
            c.get("function").and_then(|f| f.get("name")),
            "tool_choice.function.name".into(),
        )?),
        Some(_) => {
            return Err(bad(
                "tool_choice",
                "must be \"none\", \"auto\", \"required\" or a function",
            ));
        }
    };
    let last_role = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str);
    if last_role == Some("tool") {
        return Ok(None);
    }
    pick(&offered, chosen, "tool_choice.function.name")
}

/// Anthropic's messages: `tools` of `{"name", "input_schema"}`,
/// `tool_choice` `{"type": "auto" | "any" | "tool" (with "name") |
/// "none"}`; a last user message that carries a `tool_result` is the
/// answer to a call.
pub(crate) fn anthropic(body: &Map<String, Value>) -> Result<Option<ToolCall>, Problem> {
    let Some(tools) = list(body, "tools")? else {
        return Ok(None);
    };
    let mut offered = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let field = format!("tools.{i}");
        let t = t
            .as_object()
            .ok_or_else(|| bad(&field, "must be an object"))?;
        // Server tools (web search, …) have a `type` and no schema.
        if t.get("type").is_some_and(|k| k != "custom") {
            continue;
        }
        let schema = t
            .get("input_schema")
            .filter(|s| s.is_object())
            .ok_or_else(|| bad(format!("{field}.input_schema"), "Field required"))?;
        offered.push(Offered {
            name: name_of(t.get("name"), format!("{field}.name"))?,
            schema: Some(schema),
        });
    }
    let chosen = match body.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::Object(c)) => match c.get("type").and_then(Value::as_str) {
            Some("none") => return Ok(None),
            Some("auto" | "any") => None,
            Some("tool") => Some(name_of(c.get("name"), "tool_choice.name".into())?),
            _ => {
                return Err(bad(
                    "tool_choice.type",
                    "must be \"auto\", \"any\", \"tool\" or \"none\"",
                ));
            }
        },
        Some(_) => return Err(bad("tool_choice", "must be an object")),
    };
    let last = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    let answers_a_call = last
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
        });
    if answers_a_call {
        return Ok(None);
    }
    pick(&offered, chosen, "tool_choice.name")
}

/// Gemini: `tools` of `{"functionDeclarations": [{"name", "parameters"}]}`,
/// `toolConfig.functionCallingConfig` with `mode` `AUTO | ANY | NONE` and
/// `allowedFunctionNames`; a last content with a `functionResponse` part
/// is the answer to a call.
pub(crate) fn gemini(body: &Map<String, Value>) -> Result<Option<ToolCall>, Problem> {
    let Some(tools) = list(body, "tools")? else {
        return Ok(None);
    };
    let mut offered = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let field = format!("tools[{i}]");
        let t = t
            .as_object()
            .ok_or_else(|| bad(&field, "must be an object"))?;
        let Some(decls) = t.get("functionDeclarations") else {
            // googleSearch, codeExecution, …: no function to call.
            continue;
        };
        let decls = decls
            .as_array()
            .ok_or_else(|| bad(format!("{field}.functionDeclarations"), "must be an array"))?;
        for (j, d) in decls.iter().enumerate() {
            let field = format!("{field}.functionDeclarations[{j}]");
            let d = d
                .as_object()
                .ok_or_else(|| bad(&field, "must be an object"))?;
            offered.push(Offered {
                name: name_of(d.get("name"), format!("{field}.name"))?,
                schema: d
                    .get("parameters")
                    .or_else(|| d.get("parametersJsonSchema")),
            });
        }
    }
    if offered.len() > MAX_TOOLS {
        return Err(bad(
            "tools",
            &format!("must declare at most {MAX_TOOLS} functions"),
        ));
    }
    let config = body
        .get("toolConfig")
        .and_then(|c| c.get("functionCallingConfig"));
    let mode = config.and_then(|c| c.get("mode")).and_then(Value::as_str);
    if matches!(mode, Some("NONE")) {
        return Ok(None);
    }
    if let Some(m) = mode
        && !matches!(m, "AUTO" | "ANY" | "VALIDATED" | "MODE_UNSPECIFIED")
    {
        return Err(bad(
            "toolConfig.functionCallingConfig.mode",
            "must be AUTO, ANY, VALIDATED or NONE",
        ));
    }
    let chosen = config
        .and_then(|c| c.get("allowedFunctionNames"))
        .and_then(Value::as_array)
        .and_then(|names| names.first())
        .and_then(Value::as_str);
    let answers_a_call = body
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.last())
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
    if answers_a_call {
        return Ok(None);
    }
    pick(
        &offered,
        chosen,
        "toolConfig.functionCallingConfig.allowedFunctionNames",
    )
}

/// The call to the tool `chosen` names, or the first offered.
fn pick(
    offered: &[Offered<'_>],
    chosen: Option<&str>,
    field: &str,
) -> Result<Option<ToolCall>, Problem> {
    let tool = match chosen {
        Some(name) => offered
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| bad(field, &format!("names no tool offered: {name:?}")))?,
        None => match offered.first() {
            Some(t) => t,
            None => return Ok(None),
        },
    };
    Ok(Some(ToolCall {
        name: tool.name.to_owned(),
        arguments: match tool.schema {
            Some(s) => value_for(s, 0),
            None => json!({}),
        },
    }))
}

/// A value that fits `schema`: its `enum`'s first, its `default`, or one of
/// its type (objects with their required properties, or all when none are
/// listed).
pub(crate) fn value_for(schema: &Value, depth: usize) -> Value {
    let Some(s) = schema.as_object() else {
        return json!({});
    };
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(default) = s.get("default") {
        return default.clone();
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.to_ascii_lowercase(),
        // `["string", "null"]`: the first that is not null.
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ if s.contains_key("properties") => "object".into(),
        _ => "string".into(),
    };
    match ty.as_str() {
        "object" if depth < MAX_DEPTH => {
            let props = s.get("properties").and_then(Value::as_object);
            let required: Option<Vec<&str>> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect());
            let mut out = Map::new();
            for (name, prop) in props.into_iter().flatten() {
                if required.as_ref().is_none_or(|r| r.contains(&name.as_str())) {
                    out.insert(name.clone(), value_for(prop, depth + 1));
                }
            }
            Value::Object(out)
        }
        "object" => json!({}),
        "array" if depth < MAX_DEPTH => match s.get("items") {
            Some(items) => json!([value_for(items, depth + 1)]),
            None => json!([]),
        },
        "array" => json!([]),
        "integer" => json!(1),
        "number" => json!(1.5),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => json!("sim"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_fit_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "detail": {"type": "object", "properties": {"hourly": {"type": "boolean"}}},
                "optional": {"type": "number"}
            },
            "required": ["city", "unit", "days", "detail"]
        });
        assert_eq!(
            value_for(&schema, 0),
            json!({"city": "sim", "unit": "celsius", "days": 1, "detail": {"hourly": true}})
        );
        // Gemini's upper-case types.
        let gemini = json!({"type": "OBJECT", "properties": {"q": {"type": "STRING"}}});
        assert_eq!(value_for(&gemini, 0), json!({"q": "sim"}));
    }

    #[test]
    fn openai_calls_on_the_users_turn_and_reads_on_the_tools() {
        let tools = json!([{"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
        let user = obj(json!({"messages": [{"role": "user", "content": "hi"}], "tools": tools}));
        let call = openai(&user).unwrap().unwrap();
        assert_eq!(call.name, "weather");
        assert_eq!(call.arguments_json(), r#"{"city":"sim"}"#);
        assert_eq!(call.pieces().concat(), call.arguments_json());
        let answered = obj(json!({"messages": [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "sunny"}], "tools": tools}));
        assert_eq!(openai(&answered).unwrap(), None);
        let none =
            obj(json!({"messages": [{"role": "user"}], "tools": tools, "tool_choice": "none"}));
        assert_eq!(openai(&none).unwrap(), None);
        let bad = obj(json!({"messages": [], "tools": [{"type": "function", "function": {}}]}));
        match openai(&bad).unwrap_err() {
            Problem::BadRequest { field, .. } => assert_eq!(field, "tools[0].function.name"),
            other => panic!("{other:?}"),
        }
        let unknown = obj(json!({"messages": [{"role": "user"}], "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "nope"}}}));
        assert!(openai(&unknown).is_err());
    }

    #[test]
    fn anthropic_and_gemini_read_their_own_shapes() {
        let a = obj(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}]}));
        assert_eq!(anthropic(&a).unwrap().unwrap().arguments, json!({"id": 1}));
        let done = obj(
            json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "42"}]}],
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]}),
        );
        assert_eq!(anthropic(&done).unwrap(), None);
        let no_schema = obj(json!({"messages": [], "tools": [{"name": "lookup"}]}));
        assert!(anthropic(&no_schema).is_err());

        let g = obj(
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "find", "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}}}]}]}),
        );
        assert_eq!(gemini(&g).unwrap().unwrap().name, "find");
        let replied = obj(
            json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "find", "response": {}}}]}],
            "tools": [{"functionDeclarations": [{"name": "find"}]}]}),
        );
        assert_eq!(gemini(&replied).unwrap(), None);
    }
}
