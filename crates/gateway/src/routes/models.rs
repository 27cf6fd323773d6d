//! `POST /v1/chat/completions`, `/v1/embeddings`, `/v1/responses` (OpenAI
//! format) and `/v1/messages` (Anthropic format), routed by model prefix.
//!
//! A request goes: context (tenant, priority, deadline) → admission queue
//! (fair, deduplicated) → limiter (requests, tokens, in-flight, session) →
//! bulkhead → upstream (retries) → fallback models if all that failed.
//! Streams pass through chunk by chunk; the usage they report settles the
//! tokens reserved.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use tokio::time::Instant;

use crate::auth::Tenant;
use crate::body::Body;
use crate::config::ProviderConfig;
use crate::credentials;
use crate::error::ApiError;
use crate::layers::models::{Attempt, Call, Incoming, provider, route};
use crate::layers::{self, BoxFuture, Notes, Reply as LayerReply, Req, Served};
use crate::metrics;
use crate::providers::{self, RequestError};
use crate::response::{Buffered, pass_headers};
use crate::state::{AppState, inflight_resource, session_resource, tokens_resource};
use crate::upstream::{self, Answered, Failure, Plan};
use sluice_usage::Endpoint;

/// `POST /v1/chat/completions`.
pub async fn chat(State(s): State<AppState>, t: Tenant, h: HeaderMap, b: Body) -> Response {
    handle(s, Endpoint::Chat, t, h, b.0).await
}

/// `POST /v1/embeddings`.
pub async fn embeddings(State(s): State<AppState>, t: Tenant, h: HeaderMap, b: Body) -> Response {
    handle(s, Endpoint::Embeddings, t, h, b.0).await
}

/// `POST /v1/responses`.
pub async fn responses(State(s): State<AppState>, t: Tenant, h: HeaderMap, b: Body) -> Response {
    handle(s, Endpoint::Responses, t, h, b.0).await
}

/// `POST /v1/messages`.
pub async fn messages(State(s): State<AppState>, t: Tenant, h: HeaderMap, b: Body) -> Response {
    handle(s, Endpoint::Messages, t, h, b.0).await
}

/// The model routes' stack over the path below the context.
async fn handle(
    state: AppState,
    endpoint: Endpoint,
    tenant: Tenant,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let stack = layers::models::stack(
        &state,
        Rest {
            state: state.clone(),
        },
    );
    let req = Incoming {
        endpoint,
        tenant,
        headers,
        body,
    };
    layers::call(stack, req).await
}

/// One candidate model: limits, upstream with retries, the answer; the
/// path below the fallbacks, until it is layers of its own.
#[derive(Debug, Clone)]
struct Rest {
    state: AppState,
}

impl tower::Service<Req<Attempt>> for Rest {
    type Response = Served<LayerReply, Failure>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Served<LayerReply, Failure>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req<Attempt>) -> Self::Future {
        let state = self.state.clone();
        Box::pin(async move {
            let Req { call, mut notes } = req;
            let result = match provider(&state, &call.model, call.call.endpoint) {
                Ok(prov) => attempt(&state, &call.call, &call.model, prov, &mut notes).await,
                Err(e) => Err(Failure::Limited(e)),
            };
            Ok(match result {
                Ok(Reply::Buffered(b)) => Served::ok(LayerReply::Buffered(b), notes),
                Ok(Reply::Stream(res)) => Served::ok(LayerReply::Stream(res), notes),
                Err(f) => Served::err(f, notes),
            })
        })
    }
}

enum Reply {
    Buffered(Buffered),
    Stream(Response),
}

/// One candidate model: limits, upstream with retries, the answer.
async fn attempt(
    state: &AppState,
    req: &Call,
    model: &str,
    prov: &ProviderConfig,
    notes: &mut Notes,
) -> Result<Reply, Failure> {
    let cfg = &state.config;
    let adapter = providers::for_format(prov.format);
    let est = adapter.estimate(
        req.endpoint,
        &req.json,
        cfg.tokens.chars_per_token,
        cfg.tokens.default_max_tokens,
    );
    let mut needs = vec![(model.to_owned(), 1)];
    let limits = state.model_limits(model);
    let tokens = limits
        .and_then(|l| l.tokens_per_minute)
        .map(|_| tokens_resource(model));
    if let Some(t) = &tokens {
        needs.push((t.clone(), est.total));
    }
    if limits.and_then(|l| l.max_in_flight).is_some() {
        needs.push((inflight_resource(model), 1));
    }
    if let Some(thread) = &req.ctx.thread {
        needs.push((session_resource(&req.ctx.workspace, thread), 1));
    }
    // The key's and its tenant's own limits, taken with the model's.
    let caller =
        crate::keys::caller_needs(state, &req.ctx, Some(est.total)).map_err(Failure::Limited)?;
    needs.extend(caller.needs);
    let settle: Vec<String> = tokens.iter().cloned().chain(caller.tokens).collect();
    let plan = Plan {
        needs,
        requests: model.to_owned(),
        tokens: tokens.clone(),
        pool: "model",
        retryable: true,
        label: prov.name.clone(),
        provider: Some(adapter),
    };
    let upstream_model = if prov.strip_prefix {
        model
            .strip_prefix(&format!("{}/", prov.name))
            .unwrap_or(model)
    } else {
        model
    };
    // The tenant's own key, else the shared one where it is shared.
    let key = credentials::value_for(
        state.credentials.provider(&prov.name),
        &req.ctx.workspace,
        "provider",
        &prov.name,
    )
    .map_err(Failure::Limited)?;
    let call = providers::Call {
        endpoint: req.endpoint,
        body: &req.json,
        model: upstream_model,
        stream: req.stream,
        headers: &req.headers,
        key: key.as_deref(),
    };
    let outbound = adapter
        .request(&prov.base_url, &call)
        .map_err(|e| match e {
            RequestError::BadField(b) => Failure::Limited(ApiError::bad_field(&b.field, b.message)),
            RequestError::Setup(message) => Failure::Upstream {
                message: format!("provider {}: {message}", prov.name),
                attempts: 0,
            },
        })?;
    let send = || outbound.send(&state.client);
    let mut log = Vec::new();
    // Cleared the limiter: the queue's slot goes to the next request while
    // this one waits for its answer.
    let mut granted = || {
        if let Some(p) = notes.admission.as_mut() {
            p.dispatched();
        }
    };
    let called = upstream::call(state, &plan, req.ctx.deadline, &mut log, &mut granted, send).await;
    if let Some(t) = notes.trace.as_mut() {
        upstream::record_attempts(t, &log, &prov.name, model);
        t.model = Some(model.to_owned());
    }
    let Answered {
        response,
        mut grant,
        permit: pool_permit,
        attempts,
        waited,
    } = called?;
    notes.meta.attempts += attempts;
    let queued = notes.admission.as_ref().map(|p| p.waited());
    notes.meta.queued = queued.unwrap_or_default() + waited;
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = pass_headers(response.headers());
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if req.stream && status.is_success() && is_sse {
        let mut scanner = adapter.stream(&outbound.exchange);
        let settle = settle.clone();
        let mut upstream = response.bytes_stream();
        let deadline = req.ctx.deadline;
        let mut trace = notes.trace.take();
        if let Some(t) = trace.as_mut() {
            t.status = status.as_u16();
            t.attempts = notes.meta.attempts;
        }
        let writer = state.traces.clone();
        let r = route(req.endpoint);
        // Everything held lives in the stream: a client that goes away
        // drops it, which cancels the upstream call and releases the grant.
        let stream = async_stream(move |tx| async move {
            let _pool = pool_permit;
            let stream_start = Instant::now();
            let mut outcome = "complete";
            loop {
                let next =
                    tokio::time::timeout_at(deadline.max(Instant::now()), upstream.next()).await;
                match next {
                    Ok(Some(Ok(chunk))) => {
                        let out = scanner.feed(chunk);
                        if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
                            metrics::stream_disconnect(r);
                            outcome = "client_disconnected";
                            break;
                        }
                    }
                    Ok(Some(Err(e))) => {
                        // The client is told in the stream, in its format,
                        // and the stream ends cleanly after it: an SDK
                        // raises the error instead of a bare disconnect.
                        let message = format!("the upstream stream failed: {e}");
                        let event = scanner.error_event("upstream_error", &message);
                        let _ = tx.send(Ok(event)).await;
                        outcome = "upstream_error";
                        break;
                    }
                    Ok(None) => {
                        let tail = scanner.finish();
                        if !tail.is_empty() {
                            let _ = tx.send(Ok(tail)).await;
                        }
                        break;
                    }
                    Err(_) => {
                        let event = scanner.error_event(
                            "deadline_exceeded",
                            "the request's deadline passed mid-stream",
                        );
                        let _ = tx.send(Ok(event)).await;
                        outcome = "deadline";
                        break;
                    }
                }
            }
            let used = scanner.usage();
            if let Some(u) = used {
                for t in &settle {
                    let _ = grant.settle_part(t, u.total_tokens);
                }
            }
            drop(grant);
            if let (Some(mut t), Some(w)) = (trace, writer) {
                let mut m = serde_json::Map::new();
                m.insert("outcome".into(), outcome.into());
                t.record_span("stream", stream_start, Instant::now(), m);
                t.usage = used;
                t.tool_calls = scanner.tool_calls();
                if outcome != "complete" {
                    t.error = Some(format!("stream ended: {outcome}"));
                }
                w.submit(t.finish());
            }
        });
        let mut res = Response::new(axum::body::Body::from_stream(stream));
        *res.status_mut() = status;
        *res.headers_mut() = headers;
        return Ok(Reply::Stream(res));
    }
    let bytes = tokio::time::timeout_at(req.ctx.deadline, response.bytes())
        .await
        .map_err(|_| Failure::Timeout { attempts })?
        .map_err(|e| Failure::Upstream {
            message: format!("reading the upstream body: {e}"),
            attempts,
        })?;
    let answer = adapter.answer(&outbound.exchange, status, bytes);
    if let Some(u) = answer.usage {
        for t in &settle {
            let _ = grant.settle_part(t, u.total_tokens);
        }
    }
    if let Some(t) = notes.trace.as_mut() {
        t.usage = answer.usage;
        t.tool_calls = answer.tool_calls;
    }
    drop(grant);
    drop(pool_permit);
    Ok(Reply::Buffered(Buffered {
        status: answer.status,
        headers,
        body: answer.body,
    }))
}

/// A body stream fed by a task-like future through a small channel, so
/// that the producer runs as the client reads and stops when it leaves.
fn async_stream<F, Fut>(
    f: F,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let producer = tokio::spawn(f(tx));
    let guard = AbortOnDrop(producer);
    futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|item| (item, (rx, guard)))
    })
}

/// Aborts the producer when the client's body stream is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
