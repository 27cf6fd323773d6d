//! The requests the gateway bench sends: chat completions straight to the
//! sim or through a gateway, streamed, cached or as a key's holder.

use std::time::Duration;

use serde_json::json;

use super::open_loop;
use super::{MODEL, PROVIDER};

pub(crate) fn client(connections: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

/// A non-streamed chat completion, straight to the sim or through a
/// gateway.
pub(crate) fn chat(
    client: &reqwest::Client,
    base: &str,
    direct: bool,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let (url, model) = if direct {
        (
            format!("{base}/{PROVIDER}/v1/chat/completions"),
            MODEL.to_owned(),
        )
    } else {
        (
            format!("{base}/v1/chat/completions"),
            format!("{PROVIDER}/{MODEL}"),
        )
    };
    let body = json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]});
    // Straight to the sim: a key, as a provider wants one (the gateway
    // sends its own).
    let key = direct.then(|| DIRECT_KEY.to_owned());
    keyed_request(client, url, body, key)
}

/// The key a client calling the sim directly sends.
const DIRECT_KEY: &str = "sk-bench-direct";

/// A streamed chat completion through a gateway, its usage asked for as
/// a client that counts its tokens does.
pub(crate) fn streamed_chat(
    client: &reqwest::Client,
    base: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let model = format!("{PROVIDER}/{MODEL}");
    let body = json!({"model": model, "max_tokens": 16, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "ping"}]});
    request(client, url, body)
}

/// A chat completion at `temperature` 0 through a gateway: after the
/// first, answered by its cache.
pub(crate) fn cached_chat(
    client: &reqwest::Client,
    base: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let model = format!("{PROVIDER}/{MODEL}");
    let body = json!({"model": model, "max_tokens": 16, "temperature": 0, "messages": [{"role": "user", "content": "ping"}]});
    request(client, url, body)
}

fn request(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    keyed_request(client, url, body, None)
}

/// [`request`] as the holder of `key`, when given.
pub(crate) fn keyed_request(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
    key: Option<String>,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let body = body.to_string();
    let client = client.clone();
    move || {
        let r = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone());
        match &key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }
}

/// Opens connections to `base` (the sim when `direct`, else a gateway)
/// with `n` chat completions, each of which must succeed.
pub(crate) async fn warm(
    client: &reqwest::Client,
    base: &str,
    direct: bool,
    n: usize,
) -> Result<(), String> {
    let make = chat(client, base, direct);
    for _ in 0..n {
        if !open_loop::send(make()).await {
            return Err(format!(
                "{base} does not answer a chat completion for {PROVIDER}/{MODEL}"
            ));
        }
    }
    Ok(())
}
