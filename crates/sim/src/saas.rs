//! Simulated SaaS APIs (Slack, GitHub, Gmail, …) under `/{api}/…`: any
//! method, an echo of the request, each API's own request limit and the
//! same faults as the models.
//!
//! The echo includes the `Authorization` header received (`null` without
//! one), so that a test can see which credential a gateway sent. The sim
//! is a test upstream: it holds no real secret.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::config::Latency;
use crate::faults::Fault;
use crate::log::Line;
use crate::state::{Ask, Decision, Kind, Shared};
use crate::wire::body::{halved, paced, sleep_unless_shutdown};
use crate::wire::headers;

/// One request to an API.
#[derive(Debug)]
pub(crate) struct Call {
    pub api: String,
    /// The path after `/{api}`, from its `/`.
    pub rest: String,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Answers one API request.
pub(crate) async fn serve(shared: Arc<Shared>, call: Call) -> Response {
    let line = Line::new(call.method.as_str(), &call.path, &call.headers);
    if !shared.config.apis.contains_key(&call.api) {
        shared.log_only(line, 404);
        return not_found(&call.path);
    }
    let jitter = shared
        .config
        .apis
        .get(&call.api)
        .map_or(Duration::ZERO, |a| Latency::jitter(a.jitter_ms));
    if !jitter.is_zero() {
        tokio::time::sleep(jitter).await;
    }
    let outcome = shared.decide(Ask {
        kind: Kind::Api,
        name: &call.api,
        provider: "",
        tokens_in: 0,
        max_tokens: None,
        out: crate::state::Output::Text,
        line,
    });
    let api = call.api.as_str();
    let mut response = match outcome.decision {
        Decision::Admitted { fault, latency, .. } => {
            let wait = Duration::from_millis(latency.base_ms);
            admitted(&shared, &call, fault, wait).await
        }
        Decision::Limited { retry_after, .. } | Decision::Forced { retry_after } => {
            let body = json!({
                "ok": false,
                "api": api,
                "error": "rate_limited",
                "retry_after_ms": retry_after.as_millis() as u64,
            });
            let mut r = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
            headers::retry_after(retry_after, r.headers_mut());
            r
        }
        Decision::TooLarge { .. } | Decision::UnknownTarget => not_found(&call.path),
    };
    headers::ietf(&outcome.view, response.headers_mut());
    response
}

async fn admitted(shared: &Shared, call: &Call, fault: Fault, base: Duration) -> Response {
    let mut shutdown = shared.shutdown.clone();
    let wait = match fault {
        Fault::Hang(hang) => hang,
        _ => base,
    };
    if !sleep_unless_shutdown(wait, &mut shutdown).await {
        return server_error(&call.api, 503);
    }
    if let Fault::Error(status) = fault {
        return server_error(&call.api, status);
    }
    let echo = if call.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&call.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&call.body).into_owned()))
    };
    let authorization = call
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let body = json!({
        "ok": true,
        "api": call.api,
        "method": call.method.as_str(),
        "path": call.rest,
        "echo": echo,
        "authorization": authorization,
    });
    if let Fault::Disconnect { .. } = fault {
        let cut = paced(halved(Bytes::from(body.to_string())), Some(1), shutdown);
        let mut r = cut.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    }
    if matches!(fault, Fault::Malformed(_)) {
        let text = Bytes::from(body.to_string());
        let mut r = text.slice(..text.len() / 2).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    }
    let mut r = Json(body).into_response();
    let cache_control = shared
        .config
        .apis
        .get(&call.api)
        .and_then(|a| a.cache_control.as_deref())
        .and_then(|v| HeaderValue::from_str(v).ok());
    if let Some(v) = cache_control {
        r.headers_mut().insert(header::CACHE_CONTROL, v);
    }
    r
}

fn server_error(api: &str, status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"ok": false, "api": api, "error": "internal_error"});
    (status, Json(body)).into_response()
}

pub(crate) fn not_found(path: &str) -> Response {
    let body = json!({"ok": false, "error": "not_found", "path": path});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}
