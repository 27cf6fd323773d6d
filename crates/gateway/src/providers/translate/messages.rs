//! The messages of an OpenAI chat request, as [`Turn`]s.

use serde_json::{Map, Value};

use super::chat::{Chat, Part, ToolCall, Turn};
use crate::providers::BadField;

pub(super) fn messages(obj: &Map<String, Value>, chat: &mut Chat) -> Result<(), BadField> {
    let items = match obj.get("messages") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err(BadField::new("messages", "must not be empty")),
        _ => return Err(BadField::new("messages", "must be an array of messages")),
    };
    for (i, m) in items.iter().enumerate() {
        let at = |f: &str| format!("messages[{i}].{f}");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| BadField::new(&at("role"), "must be a string"))?;
        let content = m.get("content").filter(|c| !c.is_null());
        match role {
            "system" | "developer" => chat.system.push(text_of(content, &at("content"))?),
            "user" => chat.turns.push(Turn::User(parts(content, &at("content"))?)),
            "assistant" => {
                let text = match content {
                    None => None,
                    Some(c) => Some(text_of(Some(c), &at("content"))?).filter(|t| !t.is_empty()),
                };
                let tool_calls = calls(m.get("tool_calls"), &at("tool_calls"))?;
                chat.turns.push(Turn::Assistant { text, tool_calls });
            }
            "tool" => {
                let call_id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| BadField::new(&at("tool_call_id"), "must be a string"))?;
                let content = text_of(content, &at("content"))?;
                chat.turns.push(Turn::Tool {
                    call_id: call_id.to_owned(),
                    content,
                });
            }
            _ => {
                return Err(BadField::new(
                    &at("role"),
                    "must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\"",
                ));
            }
        }
    }
    Ok(())
}

/// The text of a content that may only hold text: a string or text parts.
fn text_of(content: Option<&Value>, field: &str) -> Result<String, BadField> {
    let mut out = String::new();
    for part in parts(content, field)? {
        match part {
            Part::Text(t) => out.push_str(&t),
            Part::Inline { .. } | Part::Url(_) => {
                return Err(BadField::new(field, "may only hold text here"));
            }
        }
    }
    Ok(out)
}

fn parts(content: Option<&Value>, field: &str) -> Result<Vec<Part>, BadField> {
    match content {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![Part::Text(s.clone())]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(j, p)| part(p, &format!("{field}[{j}]")))
            .collect(),
        Some(_) => Err(BadField::new(
            field,
            "must be a string or an array of content parts",
        )),
    }
}

fn part(p: &Value, field: &str) -> Result<Part, BadField> {
    match p.get("type").and_then(Value::as_str) {
        Some("text") => p
            .get("text")
            .and_then(Value::as_str)
            .map(|t| Part::Text(t.to_owned()))
            .ok_or_else(|| BadField::new(&format!("{field}.text"), "must be a string")),
        Some("image_url") => {
            let url = p
                .get("image_url")
                .and_then(|u| u.get("url").or(Some(u)))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    BadField::new(&format!("{field}.image_url.url"), "must be a string")
                })?;
            Ok(match data_url(url) {
                Some((media_type, data)) => Part::Inline {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                },
                None => Part::Url(url.to_owned()),
            })
        }
        Some(other) => Err(BadField::new(
            &format!("{field}.type"),
            format!("{other:?} parts cannot be translated: use \"text\" or \"image_url\""),
        )),
        None => Err(BadField::new(&format!("{field}.type"), "must be a string")),
    }
}

/// `data:{media_type};base64,{data}`.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

fn calls(v: Option<&Value>, field: &str) -> Result<Vec<ToolCall>, BadField> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let items = v
        .as_array()
        .ok_or_else(|| BadField::new(field, "must be an array"))?;
    items
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let at = |f: &str| format!("{field}[{j}].{f}");
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| BadField::new(&at("id"), "must be a string"))?;
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| BadField::new(&at("function.name"), "must be a string"))?;
            let raw = c
                .get("function")
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or("{}");
            let arguments: Value =
                serde_json::from_str(if raw.trim().is_empty() { "{}" } else { raw }).map_err(
                    |e| BadField::new(&at("function.arguments"), format!("must be JSON text: {e}")),
                )?;
            Ok(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments,
            })
        })
        .collect()
}
