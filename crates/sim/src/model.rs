//! The simulated model provider: OpenAI's, Anthropic's and Gemini's
//! native endpoints with
//! deterministic fake completions, real `usage`, the provider's own
//! limits and headers, and injected faults.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::config::{Latency, MalformedBody};
use crate::faults::Fault;
use crate::log::Line;
use crate::state::{Ask, Decision, Kind, MAX_TARGETS, Shared};
use crate::wire::Format;
use crate::wire::body::{halved, pace, paced, sleep_unless_shutdown};
use crate::wire::errors::Problem;
use crate::wire::headers;

mod anthropic;
mod catalog;
mod embed;
mod gemini;
mod json_mode;
mod media;
mod openai;
mod request;
mod text;
mod tools;

use request::Parsed;

/// A model endpoint, by the path after `/v1/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Responses,
    Embeddings,
    Messages,
    Models,
    /// Gemini `models/{model}:generateContent`.
    Generate,
    /// Gemini `models/{model}:streamGenerateContent`.
    StreamGenerate,
    /// Gemini `GET models`.
    GeminiModels,
    /// OpenAI's legacy `completions`.
    Completions,
    /// OpenAI `audio/transcriptions` (multipart).
    Transcriptions,
    /// OpenAI `images/generations`.
    Images,
    /// OpenAI `moderations`.
    Moderations,
}

/// An Azure OpenAI path after its base (`openai/deployments/{deployment}/…`):
/// the endpoint and the deployment (the model it serves).
pub(crate) fn azure_path(path: &str) -> Option<(Endpoint, String)> {
    let rest = path.strip_prefix("openai/deployments/")?;
    let (deployment, op) = rest.split_once('/')?;
    let endpoint = match op {
        "chat/completions" => Endpoint::Chat,
        "embeddings" => Endpoint::Embeddings,
        _ => return None,
    };
    (!deployment.is_empty()).then(|| (endpoint, deployment.to_owned()))
}

impl Endpoint {
    pub(crate) fn from_path(rest: &str) -> Option<(Self, Method)> {
        Some(match rest {
            "chat/completions" => (Endpoint::Chat, Method::POST),
            "responses" => (Endpoint::Responses, Method::POST),
            "embeddings" => (Endpoint::Embeddings, Method::POST),
            "messages" => (Endpoint::Messages, Method::POST),
            "models" => (Endpoint::Models, Method::GET),
            "completions" => (Endpoint::Completions, Method::POST),
            "audio/transcriptions" => (Endpoint::Transcriptions, Method::POST),
            "images/generations" => (Endpoint::Images, Method::POST),
            "moderations" => (Endpoint::Moderations, Method::POST),
            _ => return None,
        })
    }

    /// A Gemini path after `/v1beta/`, with the model it names.
    pub(crate) fn from_gemini_path(rest: &str) -> Option<(Self, Method, Option<String>)> {
        let rest = rest.strip_prefix("models")?;
        if rest.is_empty() {
            return Some((Endpoint::GeminiModels, Method::GET, None));
        }
        let (model, method) = rest.strip_prefix('/')?.rsplit_once(':')?;
        let endpoint = match method {
            "generateContent" => Endpoint::Generate,
            "streamGenerateContent" => Endpoint::StreamGenerate,
            _ => return None,
        };
        (!model.is_empty()).then(|| (endpoint, Method::POST, Some(model.to_owned())))
    }
}

/// One request to a model endpoint.
#[derive(Debug)]
pub(crate) struct Call {
    pub endpoint: Endpoint,
    /// The provider named by a `/{provider}/v1/…` path.
    pub provider: Option<String>,
    /// The model named by a Gemini path.
    pub model: Option<String>,
    /// Gemini's `alt=sse`: a stream as SSE rather than a JSON array.
    pub sse: bool,
    /// Came in on an Azure OpenAI path (the model is its deployment).
    pub azure: bool,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    /// Gemini's `?key=`, the other place its key may come.
    pub query_key: Option<String>,
    pub body: Bytes,
}

/// What a completion says, for any of the formats to write.
#[derive(Debug)]
pub(crate) struct Reply {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub prompt_tokens: u64,
    pub tokens: Vec<String>,
    pub truncated: bool,
    pub include_usage: bool,
    /// A call to a tool instead of text; `tokens` are its arguments'
    /// pieces then.
    pub tool: Option<tools::ToolCall>,
}

impl Reply {
    fn text(&self) -> String {
        if self.tool.is_some() {
            return String::new();
        }
        self.tokens.concat()
    }

    fn completion_tokens(&self) -> u64 {
        self.tokens.len() as u64
    }

    /// Of the prompt, the tokens reported read from the prompt cache (see
    /// the crate doc).
    fn cached_tokens(&self) -> u64 {
        if self.prompt_tokens >= 1_024 {
            self.prompt_tokens - self.prompt_tokens % 128
        } else {
            0
        }
    }

    /// Of the completion, the tokens reported spent on reasoning (see the
    /// crate doc).
    fn reasoning_tokens(&self) -> u64 {
        self.reasoning_of(self.completion_tokens())
    }

    /// Of `completion` tokens, those spent on reasoning.
    fn reasoning_of(&self, completion: u64) -> u64 {
        let name = self.model.rsplit('/').next().unwrap_or(&self.model);
        let reasons = ["o1", "o3", "o4"].iter().any(|p| name.starts_with(p))
            || name.contains("reason")
            || name.contains("think");
        if reasons { completion / 2 } else { 0 }
    }
}

/// Answers one model request.
pub(crate) async fn serve(shared: Arc<Shared>, call: Call) -> Response {
    let format = match call.endpoint {
        _ if call.azure => Format::Azure,
        Endpoint::Messages => Format::Anthropic,
        Endpoint::Generate | Endpoint::StreamGenerate | Endpoint::GeminiModels => Format::Gemini,
        Endpoint::Models if call.headers.contains_key("anthropic-version") => Format::Anthropic,
        _ => Format::OpenAi,
    };
    let line = Line::new(call.method.as_str(), &call.path, &call.headers);
    let query_key = call.query_key.as_deref();
    if !authorized(
        shared.config.api_key.as_deref(),
        format,
        &call.headers,
        query_key,
    ) {
        let seq = shared.log_only(line, 401);
        return stamp(Problem::Unauthorized.response(format), format, seq);
    }
    if matches!(call.endpoint, Endpoint::Models | Endpoint::GeminiModels) {
        let seq = shared.log_only(line, 200);
        return stamp(
            catalog::models(&shared, format, call.provider.as_deref()),
            format,
            seq,
        );
    }
    let read = if call.endpoint == Endpoint::Transcriptions {
        media::transcription(&call.headers, &call.body)
    } else {
        request::parse(
            call.endpoint,
            call.model.as_deref(),
            &call.body,
            &shared.config,
        )
    };
    let parsed = match read {
        Ok(p) => p,
        Err(problem) => {
            let seq = shared.log_only(line, problem.status().as_u16());
            return stamp(problem.response(format), format, seq);
        }
    };
    let default = format.default_provider();
    let provider = shared
        .config
        .provider_of(&parsed.model, call.provider.as_deref(), default);
    let generates = !matches!(
        call.endpoint,
        Endpoint::Embeddings | Endpoint::Images | Endpoint::Moderations
    );
    let jitter = Latency::jitter(shared.config.model_jitter_ms(&parsed.model, &provider));
    if !jitter.is_zero() {
        tokio::time::sleep(jitter).await;
    }
    let outcome = shared.decide(Ask {
        kind: Kind::Model,
        name: &parsed.model,
        provider: &provider,
        tokens_in: parsed.prompt.tokens(),
        max_tokens: generates.then_some(parsed.max_tokens),
        out: match (&parsed.tool, &parsed.json) {
            _ if call.endpoint == Endpoint::Moderations => crate::state::Output::Exact(0),
            _ if call.endpoint == Endpoint::Images => {
                crate::state::Output::Exact(parsed.media.as_ref().map_or(0, media::Ask::output))
            }
            (Some(call), _) => crate::state::Output::Exact(call.pieces().len() as u64),
            (None, Some(ask)) => ask.output(),
            (None, None) => crate::state::Output::Text,
        },
        line,
    });
    let model = parsed.model.clone();
    let mut response = match outcome.decision {
        Decision::Admitted {
            fault,
            tokens_out,
            latency,
            truncated,
            claim,
        } => {
            let answer = Answer {
                fault,
                tokens_out,
                latency,
                truncated,
                seq: outcome.seq,
                claim,
            };
            let how = How {
                endpoint: call.endpoint,
                format,
                sse: call.sse,
            };
            admitted(&shared, how, parsed, answer).await
        }
        Decision::Limited { retry_after, on } => {
            let mut r = Problem::RateLimited {
                on: Some(on),
                model,
            }
            .response(format);
            headers::retry_after(retry_after, r.headers_mut());
            r
        }
        Decision::Forced { retry_after } => {
            let mut r = Problem::RateLimited { on: None, model }.response(format);
            headers::retry_after(retry_after, r.headers_mut());
            r
        }
        // No Retry-After: waiting would not help.
        Decision::TooLarge { on } => Problem::TooLarge { on, model }.response(format),
        Decision::UnknownTarget => Problem::NotFound {
            message: format!(
                "The model `{model}` does not exist (the sim serves at most {MAX_TARGETS} models)"
            ),
        }
        .response(format),
    };
    headers::rate_limit(format, &outcome.view, response.headers_mut());
    stamp(response, format, outcome.seq)
}

/// Where an admitted request came in.
struct How {
    endpoint: Endpoint,
    format: Format,
    /// Gemini's `alt=sse`.
    sse: bool,
}

/// How an admitted request is to be answered.
struct Answer {
    fault: Fault,
    tokens_out: u64,
    latency: Latency,
    truncated: bool,
    seq: u64,
    /// Prompt tokens to report instead of the prompt's.
    claim: Option<u64>,
}

async fn admitted(shared: &Shared, how: How, parsed: Parsed, a: Answer) -> Response {
    let How {
        endpoint,
        format,
        sse,
    } = how;
    let mut shutdown = shared.shutdown.clone();
    if let Fault::Hang(wait) = a.fault
        && !sleep_unless_shutdown(wait, &mut shutdown).await
    {
        return Problem::Server(503).response(format);
    }
    if let Fault::Error(status) = a.fault {
        return Problem::Server(status).response(format);
    }
    let cut = match a.fault {
        Fault::Disconnect { after_chunks } => Some(after_chunks as usize),
        _ => None,
    };
    let prefix = match endpoint {
        Endpoint::Chat => "chatcmpl-sim",
        Endpoint::Responses => "resp_sim",
        Endpoint::Messages => "msg_sim",
        Endpoint::Generate | Endpoint::StreamGenerate => "gen_sim",
        Endpoint::Completions => "cmpl-sim",
        Endpoint::Embeddings
        | Endpoint::Models
        | Endpoint::GeminiModels
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => "sim",
    };
    let reply = Reply {
        id: format!("{prefix}{}", a.seq),
        model: parsed.model.clone(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        prompt_tokens: a.claim.unwrap_or_else(|| parsed.prompt.tokens()),
        // `a.tokens_out` counts them as the quota did ([`Output`]).
        tokens: match (&parsed.tool, &parsed.json) {
            (Some(call), _) => call.pieces(),
            (None, Some(ask)) => ask.tokens(parsed.prompt.hash(), a.tokens_out),
            (None, None) => text::tokens(parsed.prompt.hash(), a.tokens_out),
        },
        // A call's arguments and a JSON answer are whole (the sim never
        // cuts them).
        truncated: a.truncated && parsed.tool.is_none() && parsed.json.is_none(),
        include_usage: parsed.include_usage,
        tool: parsed.tool.clone(),
    };
    let events = match endpoint {
        _ if !parsed.stream => None,
        Endpoint::Chat => Some(openai::chat_events(&reply)),
        Endpoint::Responses => Some(openai::response_events(&reply)),
        Endpoint::Messages => Some(anthropic::events(&reply)),
        Endpoint::Completions => Some(media::completion_events(&reply)),
        Endpoint::StreamGenerate if sse => Some(gemini::sse_events(&reply)),
        Endpoint::StreamGenerate => Some(gemini::array_events(&reply)),
        Endpoint::Generate
        | Endpoint::Embeddings
        | Endpoint::Models
        | Endpoint::GeminiModels
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => None,
    };
    if let Some(mut events) = events {
        // Gemini's stream without `alt=sse` is one JSON array.
        let content_type = if endpoint == Endpoint::StreamGenerate && !sse {
            "application/json; charset=UTF-8"
        } else {
            "text/event-stream; charset=utf-8"
        };
        if matches!(a.fault, Fault::Malformed(_)) {
            garble(&mut events);
        }
        let body = paced(pace(events, a.latency), cut, shutdown);
        let mut r = (axum::http::StatusCode::OK, body).into_response();
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return r;
    }
    if !sleep_unless_shutdown(Duration::from_millis(a.latency.base_ms), &mut shutdown).await {
        return Problem::Server(503).response(format);
    }
    if let Some(ask) = &parsed.media {
        let (json, text) = media::reply(ask, &reply);
        if text {
            let mut r = json.as_str().unwrap_or_default().to_owned().into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return r;
        }
        return Json(json).into_response();
    }
    let json = match (&parsed.embed, endpoint) {
        (Some(ask), _) => embed::response(ask, &parsed.model, reply.prompt_tokens),
        (None, Endpoint::Completions) => media::completion(&reply),
        (None, Endpoint::Messages) => anthropic::reply(&reply),
        (None, Endpoint::Generate) => gemini::reply(&reply),
        (None, Endpoint::Responses) => openai::response(&reply, true),
        (None, _) => openai::chat(&reply),
    };
    if let Fault::Malformed(kind) = a.fault {
        // Whole on the wire: only what is inside is broken.
        let text = Bytes::from(json.to_string());
        let (body, content_type) = match kind {
            MalformedBody::Cut => (text.slice(..text.len() / 2), "application/json"),
            MalformedBody::Html => (
                Bytes::from_static(
                    b"<html><head><title>502 Bad Gateway</title></head><body>\
                      <center><h1>502 Bad Gateway</h1></center></body></html>",
                ),
                "text/html",
            ),
            MalformedBody::Empty => (Bytes::new(), "application/json"),
        };
        let mut r = body.into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        return r;
    }
    match cut {
        None => Json(json).into_response(),
        Some(_) => {
            let body = paced(halved(Bytes::from(json.to_string())), Some(1), shutdown);
            let mut r = body.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
    }
}

/// Breaks a stream after its first event: an event whose JSON stops
/// half-way and a line that is not SSE at all. The rest follows as usual,
/// so a client that skips what it cannot read still sees the end.
fn garble(events: &mut Vec<(bool, Bytes)>) {
    let at = 1.min(events.len());
    events.insert(at, (false, Bytes::from_static(b"this is not an event\n\n")));
    events.insert(
        at,
        (
            false,
            Bytes::from_static(b"data: {\"choices\": [{\"delta\": {\"content\n\n"),
        ),
    );
}

/// Whether the request carries a key the provider's way: the expected
/// one, or with none configured any that is not empty. As the providers,
/// a call without a key (or with it in another provider's header) is
/// refused: a gateway that forgets the key fails here as it would there.
fn authorized(
    expected: Option<&str>,
    format: Format,
    headers: &HeaderMap,
    query_key: Option<&str>,
) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let given = match format {
        Format::OpenAi => header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
        Format::Anthropic => header("x-api-key"),
        Format::Gemini => header("x-goog-api-key").or(query_key),
        Format::Azure => header("api-key"),
    }
    .map(str::trim)
    .filter(|k| !k.is_empty());
    match expected {
        Some(expected) => given == Some(expected),
        None => given.is_some(),
    }
}

/// The request id header each provider sends.
fn stamp(mut response: Response, format: Format, seq: u64) -> Response {
    let name = match format {
        Format::OpenAi | Format::Gemini | Format::Azure => "x-request-id",
        Format::Anthropic => "request-id",
    };
    headers::put(response.headers_mut(), name, format!("req_sim{seq}"));
    response
}
