//! Reading an OpenAI chat-completions request into a [`Chat`], each bad or
//! untranslatable field named: which fields a provider takes is the
//! table's (`providers/fields.rs`).

use serde_json::{Map, Value, json};

use super::Accepts;
use super::chat::{Chat, Tool, ToolChoice};
use super::messages::messages;
use crate::providers::BadField;
use crate::providers::fields::{self, Format};

/// Reads an OpenAI chat request for a provider that accepts `accepts`.
///
/// # Errors
/// The first field that is malformed or that the provider cannot take.
pub(crate) fn parse(body: &Value, accepts: Accepts) -> Result<Chat, BadField> {
    let obj = body
        .as_object()
        .ok_or_else(|| BadField::new("body", "must be a JSON object"))?;
    let unsupported = |field: &str| {
        BadField::new(
            field,
            format!(
                "is not supported when calling {} models through /v1/chat/completions",
                accepts.name
            ),
        )
    };
    fields::check(obj, Format::Openai, accepts.column, &unsupported)?;
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let mut chat = Chat {
        n: 1,
        ..Chat::default()
    };
    chat.max_tokens = match get("max_completion_tokens") {
        Some(_) => count(obj, "max_completion_tokens")?,
        None => count(obj, "max_tokens")?,
    };
    chat.temperature = number(obj, "temperature")?;
    chat.top_p = number(obj, "top_p")?;
    chat.presence_penalty = number(obj, "presence_penalty")?;
    chat.frequency_penalty = number(obj, "frequency_penalty")?;
    chat.seed = match get("seed") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| BadField::new("seed", "must be an integer"))?,
        ),
    };
    chat.n = count(obj, "n")?.unwrap_or(1);
    chat.stop = match get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| BadField::new("stop", "must be a string or an array of strings"))?,
        Some(_) => {
            return Err(BadField::new(
                "stop",
                "must be a string or an array of strings",
            ));
        }
    };
    chat.json_mode = match get("response_format").map(|f| f.get("type")) {
        None => false,
        Some(Some(Value::String(t))) if t == "text" => false,
        Some(Some(Value::String(t))) if t == "json_object" => true,
        Some(Some(Value::String(t))) if t == "json_schema" => {
            let spec = &obj["response_format"]["json_schema"];
            if !spec.get("name").is_some_and(Value::is_string) {
                return Err(BadField::new(
                    "response_format.json_schema.name",
                    "must be a string",
                ));
            }
            chat.json_schema = Some(match spec.get("schema") {
                Some(s @ Value::Object(_)) => s.clone(),
                None | Some(Value::Null) => json!({"type": "object"}),
                Some(_) => {
                    return Err(BadField::new(
                        "response_format.json_schema.schema",
                        "must be an object",
                    ));
                }
            });
            true
        }
        Some(Some(Value::String(_))) => return Err(unsupported("response_format.type")),
        Some(_) => {
            return Err(BadField::new(
                "response_format",
                "must be an object with a `type`",
            ));
        }
    };
    chat.stream = flag(obj, "stream")?;
    if let Some(options) = get("stream_options") {
        let options = options
            .as_object()
            .ok_or_else(|| BadField::new("stream_options", "must be an object"))?;
        chat.include_usage = flag(options, "include_usage")
            .map_err(|_| BadField::new("stream_options.include_usage", "must be a boolean"))?;
    }
    chat.no_parallel_tools = get("parallel_tool_calls") == Some(&Value::Bool(false));
    chat.user = match get("user") {
        None => None,
        Some(Value::String(u)) => Some(u.clone()),
        Some(_) => return Err(BadField::new("user", "must be a string")),
    };
    chat.tools = tools(get("tools"))?;
    chat.tool_choice = tool_choice(get("tool_choice"))?;
    messages(obj, &mut chat)?;
    Ok(chat)
}

fn count(obj: &Map<String, Value>, field: &str) -> Result<Option<u64>, BadField> {
    match obj.get(field).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(BadField::new(field, "must be an integer of at least 1")),
        },
    }
}

fn number(obj: &Map<String, Value>, field: &str) -> Result<Option<f64>, BadField> {
    match obj.get(field).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| BadField::new(field, "must be a number")),
    }
}

fn flag(obj: &Map<String, Value>, field: &str) -> Result<bool, BadField> {
    match obj.get(field).filter(|v| !v.is_null()) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(BadField::new(field, "must be a boolean")),
    }
}

fn tools(v: Option<&Value>) -> Result<Vec<Tool>, BadField> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let items = v
        .as_array()
        .ok_or_else(|| BadField::new("tools", "must be an array"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let field = format!("tools[{i}]");
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(BadField::new(
                    &format!("{field}.type"),
                    "only \"function\" tools can be translated",
                ));
            }
            let f = t
                .get("function")
                .and_then(Value::as_object)
                .ok_or_else(|| BadField::new(&format!("{field}.function"), "must be an object"))?;
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                BadField::new(&format!("{field}.function.name"), "must be a string")
            })?;
            Ok(Tool {
                name: name.to_owned(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: f
                    .get("parameters")
                    .filter(|p| !p.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            })
        })
        .collect()
}

fn tool_choice(v: Option<&Value>) -> Result<Option<ToolChoice>, BadField> {
    let bad = || {
        BadField::new(
            "tool_choice",
            "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}",
        )
    };
    Ok(match v {
        None => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => return Err(bad()),
        }),
        Some(v) => {
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(bad)?;
            Some(ToolChoice::Function(name.to_owned()))
        }
    })
}
