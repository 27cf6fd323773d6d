//! The payload of an `http` job: which configured API to call, and how.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::payload::{PayloadError, decode};

/// The most headers an `http` payload may set.
pub const MAX_HEADERS: usize = 32;
/// The longest path (with its query) an `http` payload may give.
pub const MAX_PATH_LEN: usize = 2_048;

/// Headers a payload may not set: the client owns the connection and the
/// framing, and the API registry owns the credentials.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    // The worker's own: the upstream (and the simulator) read it as the
    // job that called, so a job may not name another one.
    JOB_ID_HEADER,
];

/// The header every call of a job carries: the job's id.
pub const JOB_ID_HEADER: &str = "x-sluice-job-id";

/// `{"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
/// "headers": {…}, "body": …}`. The base URL comes from the configured API,
/// never from the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpPayload {
    /// The configured API's name, e.g. `slack`.
    pub api: String,
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE` or `HEAD`; `POST` by default.
    #[serde(default = "post")]
    pub method: String,
    /// The path under the API's base URL, from its `/`, with an optional
    /// query; no `..` segments, no scheme or host.
    pub path: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The JSON body, sent as `application/json` unless it is absent or null.
    #[serde(default)]
    pub body: Value,
}

fn post() -> String {
    "POST".to_owned()
}

impl HttpPayload {
    /// Parses and checks a payload.
    ///
    /// # Errors
    /// A [`PayloadError`] naming the field.
    pub fn parse(payload: &Value) -> Result<HttpPayload, PayloadError> {
        let p: HttpPayload = decode(payload)?;
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), PayloadError> {
        if self.api.is_empty()
            || self.api.len() > 64
            || !self
                .api
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(PayloadError::at(
                "api",
                "must be the name of a configured API (letters, digits, '_' and '-')",
            ));
        }
        if !["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"].contains(&self.method.as_str()) {
            return Err(PayloadError::at(
                "method",
                format!(
                    "{:?} is not one of GET, POST, PUT, PATCH, DELETE, HEAD",
                    self.method
                ),
            ));
        }
        check_path(&self.path).map_err(|m| PayloadError::at("path", m))?;
        if self.headers.len() > MAX_HEADERS {
            return Err(PayloadError::at(
                "headers",
                format!("at most {MAX_HEADERS} headers are allowed"),
            ));
        }
        for (name, value) in &self.headers {
            let field = format!("headers.{name}");
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| PayloadError::at(&field, "is not a valid header name"))?;
            if FORBIDDEN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(PayloadError::at(&field, "may not be set by a job"));
            }
            reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| PayloadError::at(&field, "is not a valid header value"))?;
        }
        Ok(())
    }
}

/// Why `path` cannot be appended to a base URL, if it cannot.
fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} must start with '/'"));
    }
    if path.starts_with("//") {
        return Err("must not start with '//' (that names a host)".to_owned());
    }
    if path.len() > MAX_PATH_LEN {
        return Err(format!("is longer than {MAX_PATH_LEN} bytes"));
    }
    if path.contains("://") {
        return Err("must be a path, not an absolute URL".to_owned());
    }
    if path
        .bytes()
        .any(|b| b.is_ascii_control() || b == b' ' || b == b'\\' || b == b'#' || b >= 0x80)
    {
        return Err(
            "must be printable ASCII without spaces, '\\' or '#' (percent-encode the rest)"
                .to_owned(),
        );
    }
    let route = path.split('?').next().unwrap_or(path);
    let dot_dot = route.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase();
        // `..;x` is `..` to servers that read path parameters.
        let bare = seg.split(';').next().unwrap_or(&seg);
        bare == ".." || bare == "." || seg.contains("%2e") || seg.contains("%2f")
    });
    if dot_dot {
        return Err("must not contain '.' or '..' segments or encoded dots and slashes".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(payload: Value) -> String {
        HttpPayload::parse(&payload).unwrap_err().field
    }

    #[test]
    fn accepts_a_plain_call() {
        let p = HttpPayload::parse(&json!({
            "api": "slack", "method": "POST", "path": "/api/chat.postMessage?x=1",
            "headers": {"X-Trace": "1"}, "body": {"text": "hi"}
        }))
        .unwrap();
        assert_eq!(p.api, "slack");
    }

    #[test]
    fn rejects_urls_and_traversal_naming_the_field() {
        for path in [
            "https://evil.example/x",
            "api/x",
            "//evil.example/x",
            "/a/../b",
            "/a/%2E%2E/b",
            "/a/./b",
            "/a b",
            "/a\\b",
            "",
        ] {
            assert_eq!(
                field(json!({"api": "slack", "path": path})),
                "payload.path",
                "{path}"
            );
        }
        assert_eq!(
            field(json!({"api": "slack", "path": "/x", "url": "http://a"})),
            "payload.url"
        );
        assert_eq!(
            field(json!({"api": "slack", "path": "/x", "method": "TRACE"})),
            "payload.method"
        );
        assert_eq!(
            field(json!({"api": "http://a", "path": "/x"})),
            "payload.api"
        );
        assert_eq!(
            field(json!({"api": "slack", "path": "/x", "headers": {"Host": "a"}})),
            "payload.headers.Host"
        );
        assert_eq!(
            field(json!({"api": "slack", "path": "/x", "headers": {"X-Sluice-Job-Id": "1"}})),
            "payload.headers.X-Sluice-Job-Id"
        );
        assert_eq!(
            field(json!({"api": "slack", "path": "/a/..;/b"})),
            "payload.path"
        );
        assert_eq!(field(json!({"path": "/x"})), "payload.api");
    }
}
