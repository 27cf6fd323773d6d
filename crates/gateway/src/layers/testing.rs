//! What the layers' unit tests share: a state from the default config, and
//! a probe service that stands for the stack below a layer.

use std::future::Future;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use bytes::Bytes;
use sluice_usage::Endpoint;

use super::context::{Context, Parse};
use super::model_call::{Call, Incoming};
use super::upstream::{AttemptRecord, Fault, Outgoing, Plan, Tried, Try, Upstream};
use super::{Next, Notes, Reply, Req};
use crate::client::UpstreamResponse;
use crate::config::{Config, ModelLimits};
use crate::layers::auth::Tenant;
use crate::response::Buffered;
use crate::state::AppState;

/// A state from the built-in defaults (no servers: the limiter is in
/// process, traces are off).
pub(crate) fn state() -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    state_with(config)
}

/// A state from `config`, each provider's key variable given a value
/// when it has none (a call is refused without one).
pub(crate) fn state_with(mut config: Config) -> AppState {
    for var in config
        .providers
        .iter()
        .filter_map(|p| p.api_key_env.clone())
    {
        if config.secrets.get(&var).is_none() {
            config.secrets.insert(var, "sk-test");
        }
    }
    AppState::new(config).expect("the default config starts")
}

/// The stack below a layer, answering with `F`.
pub(crate) struct Probe<F>(pub Arc<F>);

impl<F> Probe<F> {
    pub(crate) fn new(f: F) -> Self {
        Probe(Arc::new(f))
    }
}

impl<F> Clone for Probe<F> {
    fn clone(&self) -> Self {
        Probe(self.0.clone())
    }
}

impl<F, Req, Res> Next<Req, Res> for Probe<F>
where
    F: Fn(Req) -> Res + Send + Sync + 'static,
    Req: Send + 'static,
    Res: Send + 'static,
{
    fn call(self, req: Req) -> impl Future<Output = Res> + Send + 'static {
        std::future::ready((self.0)(req))
    }
}

/// The stack below a layer, answering with the future `F` returns.
pub(crate) struct Later<F>(pub Arc<F>);

impl<F> Later<F> {
    pub(crate) fn new(f: F) -> Self {
        Later(Arc::new(f))
    }
}

impl<F> Clone for Later<F> {
    fn clone(&self) -> Self {
        Later(self.0.clone())
    }
}

impl<F, Fut, Req> Next<Req, Fut::Output> for Later<F>
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
    Req: Send + 'static,
{
    fn call(self, req: Req) -> impl Future<Output = Fut::Output> + Send + 'static {
        (self.0)(req)
    }
}

/// A model call for `model` with `headers`, as the context layer reads it.
pub(crate) fn model_call(
    state: &AppState,
    model: &str,
    stream: bool,
    headers: &[(&'static str, &'static str)],
) -> Req<Box<Call>> {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, HeaderValue::from_static(v));
    }
    let tenant = Tenant::from_headers(state, &h).expect("an open gateway");
    let ctx = Context::from_headers(state, &tenant, &h).expect("good headers");
    let body = serde_json::json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let incoming = Incoming {
        state: state.clone(),
        endpoint: Endpoint::Chat,
        tenant,
        headers: h,
        body: serde_json::to_vec(&body).unwrap().into(),
    };
    let mut notes = Notes::new(state);
    let call = incoming.parse(state, ctx, &mut notes).expect("a good call");
    Req { call, notes }
}

/// A whole answer with `body`.
pub(crate) fn buffered(body: &'static str) -> Reply {
    Reply::Buffered(Buffered {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::from_static(body.as_bytes()),
    })
}

/// The body of a whole (or shared) answer.
pub(crate) fn body_of(reply: &Reply) -> Bytes {
    match reply {
        Reply::Buffered(b) => b.body.clone(),
        Reply::Joined(shared) => match &**shared {
            Ok(b) => b.body.clone(),
            Err(e) => panic!("a shared refusal: {e}"),
        },
        Reply::Stream(_) => panic!("a stream"),
        Reply::Cached(_) => panic!("a cached answer"),
    }
}

/// A model's limits: `rps` requests a second with a burst of `burst`,
/// `tpm` tokens a minute.
pub(crate) fn limited(model: &str, rps: f64, burst: u64, tpm: Option<u64>) -> AppState {
    let mut config = Config::default();
    config.trace.enabled = false;
    config.models.push(ModelLimits {
        prefix: model.to_owned(),
        requests_per_second: rps,
        burst,
        tokens_per_minute: tpm,
        max_in_flight: None,
        guess: false,
    });
    state_with(config)
}

/// An upstream call to nowhere, limited on `needs` in the `model` pool.
pub(crate) fn upstream(needs: &[(&str, u64)], tokens: Option<&str>, retryable: bool) -> Upstream {
    Upstream {
        plan: Plan {
            needs: needs.iter().map(|(r, c)| ((*r).to_owned(), *c)).collect(),
            requests: needs[0].0.to_owned(),
            tokens: tokens.map(str::to_owned),
            settle: tokens.into_iter().map(str::to_owned).collect(),
            pool: "model",
            retryable,
            once: false,
            label: "test".into(),
            name: needs[0].0.to_owned(),
            provider: None,
            checks_answer: false,
        },
        outgoing: Outgoing::new(
            reqwest::Method::POST,
            reqwest::Url::parse("http://127.0.0.1:9/").unwrap(),
            HeaderMap::new(),
            Bytes::new(),
            None,
        )
        .unwrap(),
        deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
    }
}

/// The first attempt of `up`.
pub(crate) fn first_try(state: &AppState, up: Upstream) -> Req<Try> {
    Req {
        call: Try {
            upstream: Arc::new(up),
            attempt: 1,
            pool: None,
            limiter_start: tokio::time::Instant::now(),
        },
        notes: Notes::new(state),
    }
}

/// An upstream answer with `status` and `headers`, as if it came.
pub(crate) fn answer(status: u16, headers: &[(&'static str, &'static str)]) -> UpstreamResponse {
    let mut res = axum::http::Response::builder().status(status);
    for (k, v) in headers {
        res = res.header(*k, *v);
    }
    res.body(axum::body::Body::empty()).unwrap()
}

/// What the wire hands up for `sent`.
pub(crate) fn tried(sent: Result<UpstreamResponse, Fault>, attempt: u32) -> Tried {
    let now = tokio::time::Instant::now();
    let status = sent.as_ref().ok().map(|r| r.status().as_u16());
    Tried {
        sent,
        record: AttemptRecord {
            span_id: [1; 8],
            attempt,
            limiter_start: now,
            sent: now,
            ended: now,
            status,
            outcome: "answered",
        },
    }
}
