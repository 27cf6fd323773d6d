//! Providers as adapters: one [`Provider`] per wire format builds the
//! upstream request (URL, auth headers, body), reads the answer and the
//! stream (usage, tool calls), and reads the upstream's rate-limit headers.
//! The request path above it (limits, retries, fallbacks) knows nothing of
//! formats.
//!
//! Anthropic and Gemini models also answer OpenAI clients at
//! `/v1/chat/completions`: their adapters translate the request, the
//! answer, the stream and errors (`translate.rs` holds the OpenAI side).
//!
//! A provider reads the answers and streams of its format through that
//! format's [`Dialect`] in `sluice-usage` ([`Provider::dialect`]). A new
//! wire format is one new file here with one arm in [`for_format`], and
//! its dialect's file in `sluice-usage` with one arm in
//! [`WireFormat::dialect`]; the compiler names both arms.

mod anthropic;
mod azure;
mod fields;
mod front;
mod gemini;
mod openai;
mod translate;

pub(crate) use front::{gemini_carried, provider_name};

use std::time::SystemTime;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use bytes::Bytes;
use serde_json::Value;
use sluice_limit::headers::RateLimitHeaders;
use sluice_usage::{AnswerHead, Dialect, Endpoint, Estimate, StreamScanner, Usage, WireFormat};

/// The adapter of a wire format.
pub(crate) fn for_format(format: WireFormat) -> &'static dyn Provider {
    match format {
        WireFormat::Openai => &openai::Openai,
        WireFormat::Anthropic => &anthropic::Anthropic,
        WireFormat::Gemini => &gemini::Gemini,
        WireFormat::Azure => &azure::Azure,
    }
}

/// The adapter that serves `endpoint`'s clients from a provider of
/// `format`: the format's own, or a client format in front of it
/// (`front.rs`); `None` when no translation reaches it.
pub(crate) fn for_call(format: WireFormat, endpoint: Endpoint) -> Option<&'static dyn Provider> {
    let own = for_format(format);
    if own.serves(endpoint) {
        return Some(own);
    }
    front::for_endpoint(format, endpoint).map(|f| f as &'static dyn Provider)
}

/// A request field the client got wrong, or that the provider cannot take:
/// a 400 naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadField {
    /// The field, e.g. `messages[2].content[0].type`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl BadField {
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

/// Why the upstream request could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequestError {
    /// The client's body: a 400.
    BadField(BadField),
    /// The gateway's own setup (a key that is not a header value).
    Setup(String),
}

impl From<BadField> for RequestError {
    fn from(b: BadField) -> Self {
        RequestError::BadField(b)
    }
}

/// A call as the client made it, for a provider to send upstream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The gateway endpoint the client called.
    pub endpoint: Endpoint,
    /// The client's JSON body (an object).
    pub body: &'a Value,
    /// The model name to send upstream (prefix stripped where configured).
    pub model: &'a str,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// The client's request headers (for pass-through ones such as
    /// `anthropic-version`).
    pub headers: &'a HeaderMap,
    /// The API key to authenticate with upstream, if any.
    pub key: Option<&'a str>,
    /// An upload's form (`/v1/audio/transcriptions`): sent as multipart,
    /// `body` is then only its view.
    pub form: Option<&'a sluice_form::Form>,
    /// The output limit the call's reservation assumed when the body sets
    /// none (`tokens.default_max_tokens`): sent upstream as the format's
    /// limit field, so that the upstream never writes more than was
    /// reserved (and priced against budgets).
    pub default_max_tokens: u64,
}

/// The upstream request, sent again as is on every attempt, and what
/// reading its answer needs to know.
#[derive(Debug, Clone)]
pub(crate) struct Outbound {
    /// Where it goes.
    pub url: String,
    /// Content type, accept, auth, version headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// How to read the answer.
    pub exchange: Exchange,
}

/// What reading an answer needs to know about the call that asked for it.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// The gateway endpoint the client called: its answer has that shape.
    pub endpoint: Endpoint,
    /// Whether the client asked for usage in an OpenAI chat stream itself
    /// (else the usage chunk the gateway asked for is taken out, or a
    /// translated stream gets none).
    pub client_wants_usage: bool,
    /// The model named upstream, for translated answers until the upstream
    /// names its own.
    pub model: String,
    /// A Gemini client's stream goes out as a JSON array (the form
    /// without `alt=sse`) rather than as server-sent events.
    pub array_stream: bool,
}

/// A whole (non-streamed) answer, as the client gets it.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The status for the client: the upstream's, unless its body could
    /// not be read (a 502).
    pub status: StatusCode,
    /// The body for the client.
    pub body: Bytes,
    /// The usage the provider reported.
    pub usage: Option<Usage>,
    /// How many tool calls the model made, for traces.
    pub tool_calls: u32,
    /// Cached input and reasoning output, from the provider's own body
    /// (before any translation), for the ledger.
    pub details: sluice_usage::Details,
}

/// A wire format's adapter.
pub(crate) trait Provider: std::fmt::Debug + Send + Sync {
    /// The wire format it speaks.
    fn format(&self) -> WireFormat;

    /// How its format's bodies and streams are read.
    fn dialect(&self) -> &'static dyn Dialect {
        self.format().dialect()
    }

    /// Whether it serves calls to the gateway's `endpoint`.
    fn serves(&self, endpoint: Endpoint) -> bool;

    /// The gateway route that serves its models, for refusals that point
    /// clients the right way.
    fn route(&self) -> &'static str;

    /// The tokens a call is expected to use, reserved before it is sent.
    fn estimate(
        &self,
        endpoint: Endpoint,
        body: &Value,
        chars_per_token: u64,
        default_max_tokens: u64,
    ) -> Estimate {
        self.dialect()
            .estimate(endpoint, body, chars_per_token, default_max_tokens)
    }

    /// The upstream request for `call`, against the API at `base_url`.
    ///
    /// # Errors
    /// [`RequestError::BadField`] when a translated body has a field the
    /// provider cannot take; [`RequestError::Setup`] when the key cannot
    /// be sent as a header.
    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError>;

    /// Checks `model`, the name sent upstream (prefix stripped where
    /// configured), before anything is created for the call: a format
    /// that puts it in the URL takes only what is one path segment.
    ///
    /// # Errors
    /// [`BadField`] naming `model`.
    fn check_model(&self, model: &str) -> Result<(), BadField> {
        let _ = model;
        Ok(())
    }

    /// Reads a whole answer with status `status`.
    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer;

    /// A reader of the streamed answer, fed its chunks as they come.
    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader>;

    /// The upstream's rate-limit headers. The others are passed by their
    /// name's prefix before their value is read as text.
    fn rate_limits(&self, headers: &HeaderMap, now: SystemTime) -> RateLimitHeaders {
        RateLimitHeaders::parse(
            headers
                .iter()
                .filter(|(k, _)| sluice_limit::headers::may_read(k.as_str()))
                .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
            now,
        )
    }
}

/// Reads a streamed answer on its way to the client.
pub(crate) trait StreamReader: Send {
    /// Reads the next chunk; returns the bytes to send the client now.
    fn feed(&mut self, chunk: Bytes) -> Bytes;
    /// The stream ended: returns the bytes still to send.
    fn finish(&mut self) -> Bytes;
    /// The usage reported so far.
    fn usage(&self) -> Option<Usage>;
    /// The cached input and reasoning output reported so far.
    fn details(&self) -> sluice_usage::Details;
    /// The tool calls started so far.
    fn tool_calls(&self) -> u32;
    /// What the answer said of itself so far (id, model, finish reasons).
    fn head(&self) -> AnswerHead;
    /// What the stream used so far, for settling one cut before its end
    /// (see [`StreamScanner::used_so_far`]); `None` when the reader cannot
    /// tell, and the reservation stays charged.
    fn used_so_far(&self, prompt_estimate: u64, chars_per_token: u64) -> Option<Usage>;
    /// The event that ends a stream the gateway cannot finish, in the
    /// client's format.
    fn error_event(&self, code: &str, message: &str) -> Bytes;
}

/// A stream passed to the client as it came, scanned for usage.
#[derive(Debug)]
pub(crate) struct Passthrough {
    scanner: StreamScanner,
    dialect: &'static dyn Dialect,
    endpoint: Endpoint,
}

impl Passthrough {
    pub(crate) fn new(dialect: &'static dyn Dialect, exchange: &Exchange) -> Self {
        let strip = !exchange.client_wants_usage;
        Self {
            scanner: StreamScanner::of(dialect, exchange.endpoint, strip),
            dialect,
            endpoint: exchange.endpoint,
        }
    }
}

impl StreamReader for Passthrough {
    fn feed(&mut self, chunk: Bytes) -> Bytes {
        self.scanner.feed(chunk)
    }

    fn finish(&mut self) -> Bytes {
        self.scanner.finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.scanner.usage()
    }

    fn details(&self) -> sluice_usage::Details {
        self.scanner.details()
    }

    fn tool_calls(&self) -> u32 {
        self.scanner.tool_calls()
    }

    fn head(&self) -> AnswerHead {
        self.scanner.head().clone()
    }

    fn used_so_far(&self, prompt_estimate: u64, chars_per_token: u64) -> Option<Usage> {
        Some(self.scanner.used_so_far(prompt_estimate, chars_per_token))
    }

    fn error_event(&self, code: &str, message: &str) -> Bytes {
        self.dialect.error_event(self.endpoint, code, message)
    }
}

/// A whole answer passed to the client as it came.
fn pass_answer(
    dialect: &dyn Dialect,
    endpoint: Endpoint,
    status: StatusCode,
    body: Bytes,
) -> Answer {
    let facts = dialect.read_body(endpoint, &body);
    Answer {
        status,
        usage: facts.usage,
        tool_calls: facts.tool_calls,
        details: facts.details,
        body,
    }
}

/// `base_url` with `segments` appended, each one path segment (a `/` in
/// one is sent encoded, never as a separator), and `query` set: built on a
/// parsed URL, never by joining strings, and checked to start with the
/// base URL's path, so that no model name can leave it.
///
/// # Errors
/// [`RequestError::Setup`] when `base_url` is not a URL that paths can be
/// appended to, [`RequestError::BadField`] naming `model` when the result
/// would leave the base path (which [`Provider::check_model`] prevents).
fn url(base_url: &str, segments: &[&str], query: Option<&str>) -> Result<String, RequestError> {
    let base = url::Url::parse(base_url)
        .map_err(|e| RequestError::Setup(format!("the provider's base_url does not parse: {e}")))?;
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| RequestError::Setup("the provider's base_url cannot be a base".into()))?
        .pop_if_empty()
        .extend(segments);
    url.set_query(query);
    let base_path = base.path().trim_end_matches('/');
    let inside = url
        .path()
        .strip_prefix(base_path)
        .is_some_and(|rest| rest.starts_with('/'));
    if !inside || url.host_str() != base.host_str() || url.port() != base.port() {
        return Err(
            BadField::new("model", "cannot be one path segment of the provider's URL").into(),
        );
    }
    Ok(url.into())
}

/// The headers every JSON call sends.
fn json_headers(stream: bool) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if stream {
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
    }
    h
}

/// Adds a secret header (never shown in debug output).
fn secret(headers: &mut HeaderMap, name: HeaderName, value: &str) -> Result<(), RequestError> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| RequestError::Setup("the API key is not a valid header value".to_owned()))?;
    v.set_sensitive(true);
    headers.insert(name, v);
    Ok(())
}

/// `body` with `model` replaced.
fn with_model(body: &Value, model: &str) -> Value {
    let mut body = body.clone();
    body["model"] = Value::String(model.to_owned());
    body
}

fn to_bytes(body: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(body).unwrap_or_default())
}

/// `body` with `model` replaced, as JSON bytes: those of
/// `to_bytes(&with_model(body, model))`, written from `body` as it is
/// rather than from a copy of its tree.
fn to_bytes_with_model(body: &Value, model: &str) -> Bytes {
    to_bytes_with(body, model, None)
}

/// [`to_bytes_with_model`], and `limit` (a field and its value) set
/// where the body has it `null`, else added at its end.
fn to_bytes_with(body: &Value, model: &str, limit: Option<(&str, u64)>) -> Bytes {
    match body {
        Value::Object(map) if map.contains_key("model") => {
            let with = WithModel { map, model, limit };
            Bytes::from(serde_json::to_vec(&with).unwrap_or_default())
        }
        // Not what a checked call holds (an object with a `model`).
        _ => {
            let mut body = with_model(body, model);
            if let Some((field, n)) = limit {
                body[field] = Value::from(n);
            }
            to_bytes(&body)
        }
    }
}

/// The output limit to add to `body` when it sets none of `fields`
/// (absent or `null`; other values were checked by
/// [`sluice_usage::check_bounds`]): `send` with `default`.
fn missing_limit<'f>(
    body: &Value,
    fields: &[&str],
    send: &'f str,
    default: u64,
) -> Option<(&'f str, u64)> {
    let set = fields
        .iter()
        .any(|f| body.get(*f).is_some_and(|v| !v.is_null()));
    (!set).then_some((send, default))
}

/// An object with its `model` entry's value replaced (and an output
/// limit set), serialized as `serde_json` serializes a map: the same
/// entries, in the same order, the limit last if it is new.
struct WithModel<'a> {
    map: &'a serde_json::Map<String, Value>,
    model: &'a str,
    limit: Option<(&'a str, u64)>,
}

impl serde::Serialize for WithModel<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let added = self.limit.filter(|(f, _)| !self.map.contains_key(*f));
        let len = self.map.len() + usize::from(added.is_some());
        let mut out = s.serialize_map(Some(len))?;
        for (k, v) in self.map {
            match self.limit {
                _ if k == "model" => out.serialize_entry(k, self.model)?,
                Some((f, n)) if k == f => out.serialize_entry(k, &n)?,
                _ => out.serialize_entry(k, v)?,
            }
        }
        if let Some((f, n)) = added {
            out.serialize_entry(f, &n)?;
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_with_its_model_replaced_is_the_copys_json_byte_for_byte() {
        let bodies = [
            r#"{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi \"there\" \u00e9"}],"max_tokens":16}"#,
            r#"{"a":1,"model":"x","z":{"model":"inner","n":[1.5,-2,true,null]},"user":"u"}"#,
            r#"{"model":null,"stream":true}"#,
            r#"{"messages":[]}"#,
        ];
        for raw in bodies {
            let body: Value = serde_json::from_str(raw).unwrap();
            let want = to_bytes(&with_model(&body, "gpt-4o-mini"));
            assert_eq!(to_bytes_with_model(&body, "gpt-4o-mini"), want, "{raw}");
            let text = String::from_utf8_lossy(&want);
            assert!(text.contains(r#""model":"gpt-4o-mini""#), "{text}");
        }
    }

    /// Hostile names a caller may send as the model (after the prefix).
    const HOSTILE: &[&str] = &[
        "../pro",
        "cheap/../pro",
        "cheap/../../../../v1beta/models/pro",
        "..",
        ".",
        "%2e%2e",
        "%2e%2e/%2e%2e/x",
        "..%2f..%2fx",
        "a\\..\\..\\x",
        "..;/x",
        "x?key=1",
        "x#frag",
        "//evil.example/x",
        "@evil.example",
        "x:generateContent?alt=sse&key=1",
    ];

    /// Checks that `format`'s adapter, given `model`, either refuses it or
    /// builds a URL inside `base`'s path on `base`'s host.
    fn stays_inside(format: WireFormat, base: &str, model: &str) {
        let adapter = for_format(format);
        let endpoint = match format {
            WireFormat::Anthropic => Endpoint::Messages,
            _ => Endpoint::Chat,
        };
        let body = serde_json::json!({
            "model": model,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        });
        let headers = HeaderMap::new();
        let call = Call {
            endpoint,
            body: &body,
            model,
            stream: false,
            headers: &headers,
            key: Some("secret"),
            form: None,
            default_max_tokens: 1_024,
        };
        // What the model route checks before the call exists, then what
        // the adapter builds.
        if crate::names::check("model", model).is_err()
            || crate::names::check_model_segments(model).is_err()
            || adapter.check_model(model).is_err()
        {
            return;
        }
        let Ok(out) = adapter.request(base, &call) else {
            return;
        };
        let sent = url::Url::parse(&out.url).expect("a URL");
        let base = url::Url::parse(base).unwrap();
        assert_eq!(sent.host_str(), base.host_str(), "{model:?} → {sent}");
        assert_eq!(sent.port(), base.port(), "{model:?} → {sent}");
        let prefix = format!("{}/", base.path().trim_end_matches('/'));
        assert!(sent.path().starts_with(&prefix), "{model:?} → {sent}");
        // No segment of what was sent steps up, encoded or not.
        for segment in sent.path().split('/') {
            let lower = segment.to_ascii_lowercase();
            assert!(
                !matches!(
                    lower.as_str(),
                    "." | ".." | "%2e" | "%2e%2e" | ".%2e" | "%2e."
                ),
                "{model:?} → {sent}"
            );
        }
        if format == WireFormat::Gemini {
            // The model is one segment: `models/{model}:generateContent`.
            let segments: Vec<&str> = sent.path().split('/').collect();
            let n = segments.len();
            assert_eq!(segments[n - 2], "models", "{model:?} → {sent}");
            assert_eq!(segments[n - 1], format!("{model}:generateContent"));
            assert_eq!(sent.query(), None, "{model:?} → {sent}");
        }
    }

    const BASE: &str = "http://127.0.0.1:9/google/v1beta";

    #[test]
    fn no_model_name_leaves_the_openai_base_path() {
        for m in HOSTILE {
            stays_inside(WireFormat::Openai, BASE, m);
        }
    }

    #[test]
    fn no_model_name_leaves_the_anthropic_base_path() {
        for m in HOSTILE {
            stays_inside(WireFormat::Anthropic, BASE, m);
        }
    }

    #[test]
    fn no_model_name_leaves_the_gemini_base_path() {
        for m in HOSTILE {
            stays_inside(WireFormat::Gemini, BASE, m);
        }
        // The one of issue 33: refused before any state, naming `model`.
        let err = for_format(WireFormat::Gemini).check_model("cheap/../pro");
        assert_eq!(err.map_err(|b| b.field), Err("model".to_owned()));
        assert!(
            for_format(WireFormat::Gemini)
                .check_model("gemini-2.0-flash")
                .is_ok()
        );
    }

    proptest::proptest! {
        #[test]
        fn no_random_model_name_leaves_any_base_path(
            model in "[a-z./%:?#@;\\\\-]{1,24}",
        ) {
            for format in [WireFormat::Openai, WireFormat::Anthropic, WireFormat::Gemini] {
                stays_inside(format, BASE, &model);
                stays_inside(format, "https://api.example/", &model);
            }
        }
    }
}
