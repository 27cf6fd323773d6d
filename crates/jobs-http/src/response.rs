//! Reading an upstream's answer into a job outcome, shared by the kinds.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

/// The most of a response body kept as a job's result or error.
pub const MAX_BODY: usize = 1 << 20;
/// Response headers kept in a job's result.
const KEPT_HEADERS: &[&str] = &[
    "content-type",
    "location",
    "etag",
    "x-request-id",
    "x-ratelimit-remaining",
];

/// Reads at most [`MAX_BODY`] bytes of the body; the rest is cut (and
/// said so): a job result is stored, so it must be bounded.
pub(crate) async fn body(mut response: reqwest::Response) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_BODY - out.len();
                if chunk.len() > room {
                    out.extend_from_slice(&chunk[..room]);
                    return (out, true);
                }
                out.extend_from_slice(&chunk);
            }
            Ok(None) | Err(_) => return (out, false),
        }
    }
}

/// The body as JSON if it is JSON, else as text.
pub(crate) fn body_value(bytes: &[u8], cut: bool) -> Value {
    if !cut && let Ok(v) = serde_json::from_slice(bytes) {
        return v;
    }
    Value::String(String::from_utf8_lossy(bytes).into_owned())
}

/// `{"status", "headers" (a few), "body"}`.
pub(crate) fn result(status: u16, headers: &HeaderMap, bytes: &[u8], cut: bool) -> Value {
    let mut kept = Map::new();
    for name in KEPT_HEADERS {
        if let Some(v) = headers.get(*name).and_then(|v| v.to_str().ok()) {
            kept.insert((*name).to_owned(), json!(v));
        }
    }
    let mut out = json!({"status": status, "headers": kept, "body": body_value(bytes, cut)});
    if cut {
        out["truncated"] = json!(true);
    }
    out
}

/// `Retry-After` (seconds or HTTP date) or `retry-after-ms`, if present.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after").and_then(|v| sluice_limit::headers::parse_retry_after(v, SystemTime::now()))
}

/// A short error text: status and the start of the body.
pub(crate) fn error_text(what: &str, status: u16, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]);
    format!("{what} answered {status}: {text}")
}

/// The headers as name/value pairs for the limiter's header parser.
pub(crate) fn pairs(headers: &HeaderMap) -> Vec<(&str, &str)> {
    headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
        .collect()
}

/// Takes one call's worth of `resource`, waiting up to `wait`; a wait
/// that would be longer reschedules the job (no attempt used).
pub(crate) async fn take(
    limiter: &sluice_limit::SharedLimiter,
    resource: &str,
    wait: Duration,
) -> Result<sluice_limit::Permit, sluice_jobs::worker::Outcome> {
    let deadline = tokio::time::Instant::now() + wait;
    limiter
        .acquire_many(&[(resource, 1)], Some(deadline))
        .await
        .map_err(|e| match e.retry_after() {
            Some(after) => sluice_jobs::worker::Outcome::Throttled {
                error: format!("waiting for {resource}: {e}"),
                retry_after: Some(after),
            },
            None => sluice_jobs::worker::Outcome::retry(format!("limiter: {e}")),
        })
}
