//! OpenAI's endpoints that are not chat: the legacy `/completions`,
//! `/audio/transcriptions` (a multipart form), `/images/generations`
//! and `/moderations`, read as strictly as OpenAI reads them (the field
//! named in a 400) and answered in OpenAI's shapes with usage where
//! OpenAI reports it.

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::{Value, json};
use sluice_form::{Form, boundary};

use super::Reply;
use super::request::Parsed;
use super::text::{Prompt, fnv};
use crate::wire::body::event;
use crate::wire::errors::Problem;

/// The audio file types OpenAI's transcriptions take, by extension.
const AUDIO: &[&str] = &[
    "flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm",
];
/// The image sizes the sim takes (dall-e's and gpt-image-1's).
const SIZES: &[&str] = &[
    "auto",
    "256x256",
    "512x512",
    "1024x1024",
    "1536x1024",
    "1024x1536",
    "1792x1024",
    "1024x1792",
];
/// Output tokens an image is reported to cost (gpt-image-1 bills a
/// low-quality square at 272).
pub(crate) const IMAGE_TOKENS: u64 = 272;
/// Audio bytes per reported input token (a deterministic stand-in).
const AUDIO_BYTES_PER_TOKEN: u64 = 1_000;
/// Most moderation inputs in one request.
const MAX_MODERATION_INPUTS: usize = 32;

/// What a media request asks for.
#[derive(Debug, Clone)]
pub(crate) enum Ask {
    /// A transcript, as `text` or as JSON (`verbose`: with its duration).
    Transcript { text: bool, verbose: bool },
    /// `n` images, as base64 or as URLs.
    Images { n: u64, base64: bool },
    /// One result per input.
    Moderation { inputs: usize },
}

impl Ask {
    /// The output tokens the answer reports (images': [`IMAGE_TOKENS`]
    /// each).
    pub(crate) fn output(&self) -> u64 {
        match self {
            Ask::Images { n, .. } => IMAGE_TOKENS * n,
            Ask::Transcript { .. } | Ask::Moderation { .. } => 0,
        }
    }
}

fn parsed(model: String, prompt: Prompt, media: Option<Ask>) -> Parsed {
    Parsed {
        model,
        prompt,
        max_tokens: None,
        stream: false,
        include_usage: false,
        embed: None,
        tool: None,
        json: None,
        media,
    }
}

/// A `/audio/transcriptions` form.
pub(crate) fn transcription(headers: &HeaderMap, body: &Bytes) -> Result<Parsed, Problem> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let b = boundary(content_type).map_err(|e| Problem::bad("", format!("Content-Type: {e}")))?;
    let form =
        Form::parse(body.clone(), b).map_err(|e| Problem::bad("", format!("Invalid form: {e}")))?;
    let text = |name: &str| -> Result<Option<&str>, Problem> {
        match form.text(name) {
            None => Ok(None),
            Some(Ok(t)) => Ok(Some(t)),
            Some(Err(_)) => Err(Problem::bad(name, "must be a text field")),
        }
    };
    let model = text("model")?
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Problem::bad("model", "Field required"))?
        .to_owned();
    let file = form
        .part("file")
        .ok_or_else(|| Problem::bad("file", "Field required"))?;
    let name = file
        .filename
        .as_deref()
        .ok_or_else(|| Problem::bad("file", "must be a file upload"))?;
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    if !ext.as_deref().is_some_and(|e| AUDIO.contains(&e)) {
        return Err(Problem::bad(
            "file",
            format!("Invalid file format. Supported formats: {AUDIO:?}"),
        ));
    }
    if file.data.is_empty() {
        return Err(Problem::bad("file", "The audio file is empty"));
    }
    let (text_out, verbose) = match text("response_format")? {
        None | Some("json") => (false, false),
        Some("text") => (true, false),
        Some("verbose_json") => (false, true),
        Some(_) => {
            return Err(Problem::bad(
                "response_format",
                "must be one of json, text, verbose_json",
            ));
        }
    };
    if let Some(t) = text("temperature")? {
        t.parse::<f64>()
            .ok()
            .filter(|t| (0.0..=1.0).contains(t))
            .ok_or_else(|| Problem::bad("temperature", "must be a number from 0 to 1"))?;
    }
    if text("stream")? == Some("true") {
        return Err(Problem::bad(
            "stream",
            "the sim does not stream transcripts",
        ));
    }
    let mut prompt = Prompt::default();
    if let Some(p) = text("prompt")? {
        prompt.add(p);
    }
    // The audio's tokens: its size, deterministically, seeded by its bytes.
    let audio_tokens = (file.data.len() as u64).div_ceil(AUDIO_BYTES_PER_TOKEN);
    prompt.add_tokens(&[fnv(0, &file.data)]);
    prompt.add_tokens(&vec![
        0;
        usize::try_from(audio_tokens.saturating_sub(1))
            .unwrap_or(0)
    ]);
    Ok(parsed(
        model,
        prompt,
        Some(Ask::Transcript {
            text: text_out,
            verbose,
        }),
    ))
}

/// A field of a JSON body that must be a string, if present.
fn string<'a>(body: &'a Value, name: &str) -> Result<Option<&'a str>, Problem> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Problem::bad(name, "must be a string")),
    }
}

/// An `/images/generations` body.
pub(crate) fn images(body: &Value) -> Result<Parsed, Problem> {
    let model = string(body, "model")?.unwrap_or("dall-e-2").to_owned();
    let text = string(body, "prompt")?
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Problem::bad("prompt", "Field required"))?;
    if text.chars().count() > 32_000 {
        return Err(Problem::bad("prompt", "must be at most 32000 characters"));
    }
    let n = match body.get("n") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=10).contains(n))
            .ok_or_else(|| Problem::bad("n", "must be an integer from 1 to 10"))?,
    };
    if let Some(size) = string(body, "size")?
        && !SIZES.contains(&size)
    {
        return Err(Problem::bad("size", format!("must be one of {SIZES:?}")));
    }
    let base64 = match string(body, "response_format")? {
        None | Some("url") => false,
        Some("b64_json") => true,
        Some(_) => return Err(Problem::bad("response_format", "must be url or b64_json")),
    };
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(Problem::bad("stream", "the sim does not stream images"));
    }
    let mut prompt = Prompt::default();
    prompt.add(text);
    Ok(parsed(model, prompt, Some(Ask::Images { n, base64 })))
}

/// A `/moderations` body.
pub(crate) fn moderation(body: &Value) -> Result<Parsed, Problem> {
    let model = string(body, "model")?
        .unwrap_or("omni-moderation-latest")
        .to_owned();
    let mut prompt = Prompt::default();
    let inputs = match body.get("input") {
        Some(Value::String(s)) => {
            prompt.add(s);
            1
        }
        Some(Value::Array(items)) if !items.is_empty() => {
            if items.len() > MAX_MODERATION_INPUTS {
                return Err(Problem::bad(
                    "input",
                    format!("must have at most {MAX_MODERATION_INPUTS} items"),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                let s = item
                    .as_str()
                    .ok_or_else(|| Problem::bad(format!("input[{i}]"), "must be a string"))?;
                prompt.add(s);
            }
            items.len()
        }
        Some(_) => {
            return Err(Problem::bad(
                "input",
                "must be a string or an array of strings",
            ));
        }
        None => return Err(Problem::bad("input", "Field required")),
    };
    Ok(parsed(model, prompt, Some(Ask::Moderation { inputs })))
}

/// The answer to a media request, and its content type.
pub(crate) fn reply(ask: &Ask, r: &Reply) -> (Value, bool) {
    match ask {
        Ask::Transcript { text: true, .. } => (Value::String(r.tokens.concat()), true),
        Ask::Transcript { verbose, .. } => {
            let usage = json!({
                "type": "tokens",
                "input_tokens": r.prompt_tokens,
                "input_token_details": {"audio_tokens": r.prompt_tokens, "text_tokens": 0},
                "output_tokens": r.completion_tokens(),
                "total_tokens": r.prompt_tokens + r.completion_tokens(),
            });
            let mut body = json!({"text": r.tokens.concat(), "usage": usage});
            if *verbose {
                body["task"] = json!("transcribe");
                body["language"] = json!("english");
                body["duration"] = json!(r.prompt_tokens);
            }
            (body, false)
        }
        Ask::Images { n, base64 } => {
            let data: Vec<Value> = (0..*n)
                .map(|i| {
                    if *base64 {
                        json!({"b64_json": "iVBORw0KGgo=", "revised_prompt": null})
                    } else {
                        json!({"url": format!("https://sim.invalid/images/{}-{i}.png", r.id)})
                    }
                })
                .collect();
            let out = ask.output();
            let body = json!({
                "created": r.created,
                "data": data,
                "usage": {
                    "input_tokens": r.prompt_tokens,
                    "input_tokens_details": {"text_tokens": r.prompt_tokens, "image_tokens": 0},
                    "output_tokens": out,
                    "total_tokens": r.prompt_tokens + out,
                },
            });
            (body, false)
        }
        Ask::Moderation { inputs } => {
            let results: Vec<Value> = (0..*inputs)
                .map(|_| {
                    json!({"flagged": false,
                        "categories": {"harassment": false, "hate": false, "self-harm": false,
                            "sexual": false, "violence": false},
                        "category_scores": {"harassment": 0.0001, "hate": 0.0001,
                            "self-harm": 0.0001, "sexual": 0.0001, "violence": 0.0001}})
                })
                .collect();
            (
                json!({"id": format!("modr-{}", r.id), "model": r.model, "results": results}),
                false,
            )
        }
    }
}

/// A legacy `text_completion` answer.
pub(crate) fn completion(r: &Reply) -> Value {
    json!({
        "id": r.id,
        "object": "text_completion",
        "created": r.created,
        "model": r.model,
        "choices": [{"text": r.tokens.concat(), "index": 0, "logprobs": null,
            "finish_reason": if r.truncated { "length" } else { "stop" }}],
        "usage": completion_usage(r),
    })
}

fn completion_usage(r: &Reply) -> Value {
    let (p, c) = (r.prompt_tokens, r.completion_tokens());
    json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c})
}

/// A legacy completion's stream: a chunk per token, the last with its
/// finish reason, the usage chunk when asked for, `[DONE]`.
pub(crate) fn completion_events(r: &Reply) -> Vec<(bool, Bytes)> {
    let chunk = |text: &str, finish: Value| {
        json!({"id": r.id, "object": "text_completion", "created": r.created, "model": r.model,
            "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}]})
    };
    let mut out: Vec<(bool, Bytes)> = r
        .tokens
        .iter()
        .map(|t| (true, event(None, &chunk(t, Value::Null))))
        .collect();
    let finish = if r.truncated { "length" } else { "stop" };
    out.push((false, event(None, &chunk("", json!(finish)))));
    if r.include_usage {
        let last = json!({"id": r.id, "object": "text_completion", "created": r.created,
            "model": r.model, "choices": [], "usage": completion_usage(r)});
        out.push((false, event(None, &last)));
    }
    out.push((false, Bytes::from_static(b"data: [DONE]\n\n")));
    out
}
