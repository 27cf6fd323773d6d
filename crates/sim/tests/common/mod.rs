//! Helpers shared by the integration tests: start a sim on a free port,
//! send JSON, read SSE.
#![allow(dead_code)] // each test crate uses a different part

use futures_util::StreamExt;
use serde_json::{Value, json};
use sluice_sim::{Limits, Sim, SimConfig, SimHandle};

pub async fn start(config: SimConfig) -> SimHandle {
    Sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// A config with no limits and the given model limits on `m`.
pub fn limited_model(model: &str, limits: Limits) -> SimConfig {
    let mut config = SimConfig::unlimited();
    config.models.insert(
        model.to_owned(),
        sluice_sim::ModelConfig {
            limits: Some(limits),
            ..Default::default()
        },
    );
    config
}

pub fn client() -> reqwest::Client {
    // In a workspace build reqwest's features unify with the gateway's
    // (`rustls-no-provider`, with ring installed by the gateway at start):
    // a client then needs a process-wide crypto provider first.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .default_headers(keys())
        .build()
        .expect("a client")
}

/// A client that sends no key unless told.
pub fn bare() -> reqwest::Client {
    let _ = client(); // installs the crypto provider
    reqwest::Client::new()
}

/// A key in each provider's header: the sim refuses a model call without
/// one, as the providers do. Its tests of that send their own headers.
pub fn keys() -> reqwest::header::HeaderMap {
    let mut h = reqwest::header::HeaderMap::new();
    let key = reqwest::header::HeaderValue::from_static;
    h.insert("authorization", key("Bearer sk-sim-test"));
    h.insert("x-api-key", key("sk-ant-sim-test"));
    h.insert("x-goog-api-key", key("sim-test-key"));
    h.insert("api-key", key("azure-sim-test"));
    h
}

pub async fn post(sim: &SimHandle, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", sim.url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

pub async fn post_raw(sim: &SimHandle, path: &str, body: &'static str) -> reqwest::Response {
    client()
        .post(format!("{}{path}", sim.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

pub fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Say something short."}]})
}

pub fn message(model: &str) -> Value {
    json!({"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "Hello there."}]})
}

/// One SSE event: its `event:` name (if any) and its `data:`.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

pub fn parse_sse(text: &str) -> Vec<Event> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = Event {
                name: None,
                data: String::new(),
            };
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event.name = Some(name.to_owned());
                } else if let Some(data) = line.strip_prefix("data: ") {
                    event.data.push_str(data);
                }
            }
            event
        })
        .collect()
}

/// Reads a body to its end: the bytes received, and whether it ended in
/// an error (a dropped connection) rather than cleanly.
pub async fn read_body(response: reqwest::Response) -> (String, bool) {
    let mut stream = response.bytes_stream();
    let mut bytes = Vec::new();
    let mut failed = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => bytes.extend_from_slice(&c),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), failed)
}

pub fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

/// The status of a POST.
pub async fn status_of(sim: &SimHandle, path: &str, body: &Value) -> u16 {
    post(sim, path, body).await.status().as_u16()
}

/// POSTs a streaming request and reads its events; the stream must be a
/// 200 `text/event-stream` that ends cleanly.
pub async fn stream(sim: &SimHandle, path: &str, body: &Value) -> Vec<Event> {
    let r = post(sim, path, body).await;
    assert_eq!(r.status(), 200);
    let kind = header(&r, "content-type").unwrap();
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let (text, failed) = read_body(r).await;
    assert!(!failed, "the stream broke");
    parse_sse(&text)
}

/// GETs `path` with extra headers and reads JSON.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    sim: &SimHandle,
    path: &str,
    headers: &[(&str, &str)],
) -> T {
    let mut req = client().get(format!("{}{path}", sim.url()));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap().json().await.unwrap()
}
