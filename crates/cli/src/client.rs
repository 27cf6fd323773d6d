//! One HTTP call to a running gateway, for the commands that steer it
//! (`sluice jobs`, `sluice keys`, `sluice tenants`, `sluice tiers`): the
//! target checked, the answer read as JSON, and an error answer turned
//! into its message.

use reqwest::Method;
use serde_json::Value;

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The arguments cannot make a request (exit 2).
    Usage(String),
    /// The gateway was unreachable or said no (exit 1).
    Failed(String),
}

/// A request to send.
#[derive(Debug)]
pub struct Call<'a> {
    /// The gateway's base URL.
    pub target: &'a str,
    /// The method.
    pub method: Method,
    /// The path and query.
    pub path: &'a str,
    /// The bearer credential.
    pub bearer: Option<&'a str>,
    /// `x-sluice-workspace`.
    pub workspace: Option<&'a str>,
    /// A JSON body.
    pub body: Option<&'a Value>,
    /// Added to the message of a 401 or 403 (which credential to pass).
    pub auth_hint: fn(u16) -> &'static str,
}

/// Sends `call` and returns the JSON answer of a 2xx.
///
/// # Errors
/// [`Failure::Usage`] for a bad target, [`Failure::Failed`] with the
/// gateway's message (or why it could not be reached).
pub async fn send(call: Call<'_>) -> Result<Value, Failure> {
    let base = call.target.trim_end_matches('/');
    let parsed = url::Url::parse(base)
        .map_err(|e| Failure::Usage(format!("--target {base:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Failure::Usage(format!(
            "--target {base:?} must be an http:// or https:// URL"
        )));
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| Failure::Failed(format!("http client: {e}")))?;
    let mut req = client.request(call.method, format!("{base}{}", call.path));
    if let Some(token) = call.bearer {
        req = req.bearer_auth(token);
    }
    if let Some(ws) = call.workspace {
        req = req.header("x-sluice-workspace", ws);
    }
    if let Some(body) = call.body {
        req = req.json(body);
    }
    let res = req.send().await.map_err(|e| {
        Failure::Failed(format!(
            "cannot reach the gateway at {base}: {} (is `sluice serve` running there? see --target)",
            sluice_gateway::error::chain(&e)
        ))
    })?;
    let status = res.status();
    let text = res
        .text()
        .await
        .map_err(|e| Failure::Failed(format!("reading the answer from {base}: {e}")))?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let message = body["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| text.chars().take(500).collect());
        let hint = (call.auth_hint)(status.as_u16());
        return Err(Failure::Failed(format!("{status}: {message}{hint}")));
    }
    if body.is_null() {
        return Err(Failure::Failed(format!(
            "the answer from {base} is not JSON: {}",
            text.chars().take(200).collect::<String>()
        )));
    }
    Ok(body)
}

/// A path segment, percent-encoded.
pub fn segment(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
