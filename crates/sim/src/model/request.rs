//! Reading request bodies field by field, so that a bad one is refused
//! with the name of the field, as providers do, and never panics.

use serde_json::{Map, Value};

use super::Endpoint;
use super::text::Prompt;
use crate::config::{MAX_DIMENSIONS, SimConfig};
use crate::wire::errors::Problem;

/// Most inputs one embeddings request may carry (OpenAI's limit).
const MAX_INPUTS: usize = 2_048;
/// Most numbers one embeddings answer may hold (2048 inputs of 2048
/// dimensions), so that one request cannot make the sim build gigabytes.
const MAX_VALUES: u64 = 1 << 22;

/// What the sim needs from a model request.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub model: String,
    pub prompt: Prompt,
    pub max_tokens: Option<u64>,
    pub stream: bool,
    pub include_usage: bool,
    pub embed: Option<EmbedAsk>,
    /// The tool call to answer with ([`super::tools`]).
    pub tool: Option<super::tools::ToolCall>,
    /// The JSON the answer must be ([`super::json_mode`]).
    pub json: Option<super::json_mode::Ask>,
    /// What a transcription, image or moderation request asks for
    /// ([`super::media`]).
    pub media: Option<super::media::Ask>,
}

/// An embeddings request: a seed per input (a hash of it), one vector
/// each.
#[derive(Debug, Clone)]
pub(crate) struct EmbedAsk {
    pub seeds: Vec<u64>,
    pub dimensions: u32,
    pub base64: bool,
}

struct Obj<'a>(&'a Map<String, Value>);

impl<'a> Obj<'a> {
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn string(&self, name: &str) -> Result<&'a str, Problem> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(Problem::bad(name, "must be a string")),
            None => Err(Problem::bad(name, "Field required")),
        }
    }

    fn count(&self, name: &str) -> Result<Option<u64>, Problem> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => Err(Problem::bad(name, "must be an integer of at least 1")),
            },
        }
    }

    fn flag(&self, name: &str) -> Result<bool, Problem> {
        match self.get(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(Problem::bad(name, "must be a boolean")),
        }
    }

    fn array(&self, name: &str) -> Result<&'a Vec<Value>, Problem> {
        match self.get(name) {
            Some(Value::Array(a)) if !a.is_empty() => Ok(a),
            Some(Value::Array(_)) => Err(Problem::bad(name, "must not be empty")),
            Some(_) => Err(Problem::bad(name, "must be an array")),
            None => Err(Problem::bad(name, "Field required")),
        }
    }
}

fn object<'a>(v: &'a Value, field: &str) -> Result<Obj<'a>, Problem> {
    v.as_object()
        .map(Obj)
        .ok_or_else(|| Problem::bad(field, "must be an object"))
}

/// Adds the text of a message's content: a string, or an array of parts
/// whose `text` (or nested `content`, as in tool results) counts.
fn content(prompt: &mut Prompt, v: &Value, field: &str) -> Result<(), Problem> {
    match v {
        Value::Null => Ok(()),
        Value::String(s) => {
            prompt.add(s);
            Ok(())
        }
        Value::Array(parts) => {
            for (i, part) in parts.iter().enumerate() {
                let field = format!("{field}[{i}]");
                let part = object(part, &field)?;
                for key in ["text", "content", "output"] {
                    if let Some(inner) = part.get(key) {
                        content(prompt, inner, &format!("{field}.{key}"))?;
                    }
                }
            }
            Ok(())
        }
        _ => Err(Problem::bad(
            field,
            "must be a string or an array of content parts",
        )),
    }
}

fn messages(prompt: &mut Prompt, body: &Obj<'_>) -> Result<(), Problem> {
    for (i, m) in body.array("messages")?.iter().enumerate() {
        let field = format!("messages[{i}]");
        let m = object(m, &field)?;
        m.string("role")
            .map_err(|_| Problem::bad(format!("{field}.role"), "must be a string"))?;
        if let Some(c) = m.get("content") {
            content(prompt, c, &format!("{field}.content"))?;
        }
    }
    Ok(())
}

/// Parses and checks a request body for `endpoint`; Gemini's and Azure's
/// endpoints take the model from the path (`path_model`), the others from
/// the body.
pub(crate) fn parse(
    endpoint: Endpoint,
    path_model: Option<&str>,
    body: &[u8],
    config: &SimConfig,
) -> Result<Parsed, Problem> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Problem::bad("", format!("could not parse the JSON body: {e}")))?;
    match endpoint {
        Endpoint::Images => return super::media::images(&value),
        Endpoint::Moderations => return super::media::moderation(&value),
        _ => {}
    }
    let body = object(&value, "body")?;
    if matches!(endpoint, Endpoint::Generate | Endpoint::StreamGenerate) {
        let model = path_model.unwrap_or_default().to_owned();
        return gemini(&body, model, endpoint == Endpoint::StreamGenerate);
    }
    // Azure names the model (its deployment) in the path; the body's
    // `model`, if any, is not read.
    let model = match path_model {
        Some(m) => m.to_owned(),
        None => body.string("model")?.to_owned(),
    };
    let mut prompt = Prompt::default();
    let mut parsed = Parsed {
        model,
        prompt,
        max_tokens: None,
        stream: body.flag("stream")?,
        include_usage: false,
        embed: None,
        tool: None,
        json: None,
        media: None,
    };
    match endpoint {
        Endpoint::Chat => {
            messages(&mut prompt, &body)?;
            if let Some(tools) = body.get("tools") {
                prompt.add(&tools.to_string());
            }
            parsed.tool = super::tools::openai(body.0)?;
            parsed.json = super::json_mode::openai(body.0)?;
            // OpenAI's reasoning models refuse the older field.
            if reasons_openai(&parsed.model) && body.get("max_tokens").is_some() {
                return Err(Problem::bad(
                    "max_tokens",
                    "Unsupported parameter: 'max_tokens' is not supported with this model. \
                     Use 'max_completion_tokens' instead.",
                ));
            }
            parsed.max_tokens = match body.count("max_completion_tokens")? {
                Some(n) => Some(n),
                None => body.count("max_tokens")?,
            };
            if let Some(opts) = body.get("stream_options") {
                parsed.include_usage = object(opts, "stream_options")?
                    .flag("include_usage")
                    .map_err(|_| {
                        Problem::bad("stream_options.include_usage", "must be a boolean")
                    })?;
            }
        }
        Endpoint::Messages => {
            parsed.max_tokens = Some(
                body.count("max_tokens")?
                    .ok_or_else(|| Problem::bad("max_tokens", "Field required"))?,
            );
            if let Some(system) = body.get("system") {
                content(&mut prompt, system, "system")?;
            }
            messages(&mut prompt, &body)?;
            if let Some(tools) = body.get("tools") {
                prompt.add(&tools.to_string());
            }
            parsed.tool = super::tools::anthropic(body.0)?;
            parsed.json = super::json_mode::anthropic(body.0)?;
        }
        Endpoint::Responses => {
            if let Some(i) = body.get("instructions") {
                let s = i
                    .as_str()
                    .ok_or_else(|| Problem::bad("instructions", "must be a string"))?;
                prompt.add(s);
            }
            match body.get("input") {
                Some(Value::String(s)) => prompt.add(s),
                Some(v @ Value::Array(_)) => content(&mut prompt, v, "input")?,
                Some(_) => {
                    return Err(Problem::bad(
                        "input",
                        "must be a string or an array of items",
                    ));
                }
                None => return Err(Problem::bad("input", "Field required")),
            }
            parsed.max_tokens = body.count("max_output_tokens")?;
        }
        Endpoint::Embeddings => parsed.embed = Some(embeddings(&mut prompt, &body, config)?),
        Endpoint::Completions => {
            match body.get("prompt") {
                Some(Value::String(s)) => prompt.add(s),
                Some(Value::Array(items)) if !items.is_empty() => {
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            Value::String(s) => prompt.add(s),
                            Value::Number(n) if n.is_u64() => {
                                prompt.add_tokens(&[n.as_u64().unwrap_or(0)]);
                            }
                            _ => {
                                return Err(Problem::bad(
                                    format!("prompt[{i}]"),
                                    "must be a string or a token id",
                                ));
                            }
                        }
                    }
                }
                Some(_) => {
                    return Err(Problem::bad(
                        "prompt",
                        "must be a string or a non-empty array",
                    ));
                }
                None => return Err(Problem::bad("prompt", "Field required")),
            }
            parsed.max_tokens = body.count("max_tokens")?;
            if let Some(opts) = body.get("stream_options") {
                parsed.include_usage = object(opts, "stream_options")?
                    .flag("include_usage")
                    .map_err(|_| {
                        Problem::bad("stream_options.include_usage", "must be a boolean")
                    })?;
            }
        }
        // Read whole above; a transcription is a form (`media.rs`).
        Endpoint::Models
        | Endpoint::GeminiModels
        | Endpoint::Generate
        | Endpoint::StreamGenerate
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => {}
    }
    parsed.prompt = prompt;
    Ok(parsed)
}

/// Whether `model` is one of OpenAI's reasoning models (`o1`, `o3`,
/// `o4-mini`, `gpt-5`, …), which take `max_completion_tokens` only.
fn reasons_openai(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    let family = |p: &str| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    ["o1", "o3", "o4"].into_iter().any(family) || name.starts_with("gpt-5")
}

/// The text of a Gemini `Content`'s parts: `text`, and function calls
/// and responses as their JSON. Media parts (`inlineData`, `fileData`)
/// carry no text.
fn gemini_parts(prompt: &mut Prompt, content: &Value, field: &str) -> Result<(), Problem> {
    let content = object(content, field)?;
    let parts = content.array("parts").map_err(|p| prefixed(p, field))?;
    for (i, part) in parts.iter().enumerate() {
        let field = format!("{field}.parts[{i}]");
        let part = object(part, &field)?;
        match part.get("text") {
            Some(Value::String(t)) => prompt.add(t),
            Some(_) => return Err(Problem::bad(format!("{field}.text"), "must be a string")),
            None => {}
        }
        for key in ["functionCall", "functionResponse"] {
            if let Some(v) = part.get(key) {
                prompt.add(&v.to_string());
            }
        }
    }
    Ok(())
}

/// A problem about a field inside `outer`, named from the top.
fn prefixed(p: Problem, outer: &str) -> Problem {
    match p {
        Problem::BadRequest { field, message } => Problem::bad(format!("{outer}.{field}"), message),
        other => other,
    }
}

/// A Gemini `generateContent` body: `contents` (roles `user` and
/// `model`), `systemInstruction`, `tools`, `generationConfig`.
fn gemini(body: &Obj<'_>, model: String, stream: bool) -> Result<Parsed, Problem> {
    let mut prompt = Prompt::default();
    if let Some(system) = body.get("systemInstruction") {
        gemini_parts(&mut prompt, system, "systemInstruction")?;
    }
    for (i, c) in body.array("contents")?.iter().enumerate() {
        let field = format!("contents[{i}]");
        match object(c, &field)?.get("role") {
            None => {}
            Some(Value::String(r)) if r == "user" || r == "model" => {}
            Some(_) => {
                return Err(Problem::bad(
                    format!("{field}.role"),
                    "must be \"user\" or \"model\"",
                ));
            }
        }
        gemini_parts(&mut prompt, c, &field)?;
    }
    if let Some(tools) = body.get("tools") {
        prompt.add(&tools.to_string());
    }
    let max_tokens = match body.get("generationConfig") {
        Some(c) => object(c, "generationConfig")?
            .count("maxOutputTokens")
            .map_err(|p| prefixed(p, "generationConfig"))?,
        None => None,
    };
    Ok(Parsed {
        model,
        prompt,
        max_tokens,
        stream,
        // Every Gemini response carries its usage.
        include_usage: true,
        embed: None,
        tool: super::tools::gemini(body.0)?,
        json: super::json_mode::gemini(body.0)?,
        media: None,
    })
}

fn embeddings(
    prompt: &mut Prompt,
    body: &Obj<'_>,
    config: &SimConfig,
) -> Result<EmbedAsk, Problem> {
    let bad_input = || {
        Problem::bad(
            "input",
            "must be a string, an array of strings, or token arrays",
        )
    };
    let inputs: Vec<&Value> = match body.get("input") {
        None => return Err(Problem::bad("input", "Field required")),
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(Problem::bad("input", "must not be empty"));
        }
        // One input given as token ids.
        Some(v @ Value::Array(items)) if items.iter().all(Value::is_u64) => vec![v],
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v @ Value::String(_)) => vec![v],
        Some(_) => return Err(bad_input()),
    };
    if inputs.len() > MAX_INPUTS {
        return Err(Problem::bad(
            "input",
            format!("must have at most {MAX_INPUTS} items"),
        ));
    }
    let mut seeds = Vec::with_capacity(inputs.len());
    for input in inputs {
        let mut one = Prompt::default();
        match input {
            Value::String(s) => {
                one.add(s);
                prompt.add(s);
            }
            Value::Array(ids) => {
                let ids: Vec<u64> = ids
                    .iter()
                    .map(Value::as_u64)
                    .collect::<Option<_>>()
                    .ok_or_else(bad_input)?;
                one.add_tokens(&ids);
                prompt.add_tokens(&ids);
            }
            _ => return Err(bad_input()),
        }
        seeds.push(one.hash());
    }
    let dimensions = match body.count("dimensions")? {
        None => config.embedding_dimensions,
        Some(d) if d <= u64::from(MAX_DIMENSIONS) => d as u32,
        Some(_) => {
            return Err(Problem::bad(
                "dimensions",
                format!("must be at most {MAX_DIMENSIONS}"),
            ));
        }
    };
    if seeds.len() as u64 * u64::from(dimensions) > MAX_VALUES {
        return Err(Problem::bad(
            "input",
            format!("inputs times dimensions must be at most {MAX_VALUES}"),
        ));
    }
    let base64 = match body.get("encoding_format") {
        None => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(_) => {
            return Err(Problem::bad(
                "encoding_format",
                "must be \"float\" or \"base64\"",
            ));
        }
    };
    Ok(EmbedAsk {
        seeds,
        dimensions,
        base64,
    })
}
