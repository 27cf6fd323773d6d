//! Provider: one candidate model's call in its provider's wire format.
//! On the way down the adapter ([`crate::providers`]) estimates the
//! tokens, and builds the upstream request with the tenant's key; what to
//! limit it on is planned here. On the way up the adapter reads the
//! answer — whole, or as a stream passed on chunk by chunk ([`stream`]) —
//! and its usage settles the tokens reserved.

mod stream;

use std::sync::Arc;

use axum::http::{StatusCode, header};

use super::failure::Failure;
use super::model_call::{Attempt, route};
use super::step::{Step, StepLayer};
use super::upstream::{Outgoing, Plan, Upstream};
use super::usage::{Delivery, bounded};
use super::{Next, Notes, Reply, Req, Served, call};
use crate::client::Route;
use crate::config::ProviderConfig;
use crate::credentials;
use crate::error::ApiError;
use crate::limits::resources::{inflight_resource, session_resource, tokens_resource};
use crate::pools::DeploymentState;
use crate::providers::{self, Exchange, Outbound, Provider, RequestError};
use crate::response::{Buffered, pass_headers};
use crate::state::AppState;

/// Wraps a stack in [`Adapt`].
pub(crate) type ProviderLayer = StepLayer<Adapt>;

/// See the module doc.
pub(crate) enum Adapt {}

impl<S> Step<Req<Attempt>, S> for Adapt
where
    S: Next<Req<Arc<Upstream>>, Served<Delivery, Failure>>,
{
    type Response = Served<Reply, Failure>;

    async fn serve(state: AppState, inner: S, req: Req<Attempt>) -> Served<Reply, Failure> {
        let Req { call: a, mut notes } = req;
        let (
            adapter,
            Outbound {
                url,
                headers,
                body,
                exchange,
            },
            plan,
            estimate,
            route,
        ) = match prepare(&state, &a) {
            Ok(prepared) => prepared,
            Err(f) => return Served::err(f, notes),
        };
        if let Some(d) = notes.ledger.as_mut() {
            d.route(&plan.label, &a.model, target(&state, &a));
        }
        if let Some(t) = notes.trace.as_mut() {
            t.model = Some(a.model.clone());
        }
        // The headers and body go on as they are: reading the answer
        // needs only the exchange.
        let outgoing = Outgoing::to(
            reqwest::Method::POST,
            &url,
            headers,
            body,
            Some(a.call.ctx.clone()),
        );
        let outgoing = match outgoing {
            Ok(outgoing) => outgoing.by(route),
            Err(e) => {
                let f = Failure::Upstream {
                    message: format!("provider {}: its URL does not parse: {e}", plan.label),
                    attempts: 0,
                };
                return Served::err(f, notes);
            }
        };
        if let Some(o) = notes.trace.as_mut().and_then(|t| t.otel.as_mut()) {
            let upstream = match target(&state, &a) {
                Some(d) => d.upstream_model.as_str(),
                None => a
                    .call
                    .provider_for(&state, &a.model)
                    .map_or(a.model.as_str(), |p| upstream_model(p, &a.model)),
            };
            o.model_began(&crate::otel::ModelCall {
                endpoint: a.call.endpoint,
                provider: &plan.label,
                model: &a.model,
                upstream_model: upstream,
                url: &outgoing.url,
                body: &a.call.json,
                stream: a.call.stream,
            });
        }
        // One copy, shared by the layers below and every attempt.
        let up = Arc::new(Upstream {
            plan,
            outgoing,
            deadline: a.call.ctx.deadline,
        });
        let Served { result, mut notes } = call(inner, Req { call: up, notes }).await;
        let result = match result {
            Ok(delivery) => {
                let answer = Answer {
                    adapter,
                    exchange: &exchange,
                    estimate,
                };
                read(&state, &a, answer, delivery, &mut notes).await
            }
            Err(f) => Err(f),
        };
        if let (Err(f), Some(o)) = (&result, notes.trace.as_mut().and_then(|t| t.otel.as_mut())) {
            o.model_ended(None, None, Some((f.kind(), &f.message())));
        }
        Served { result, notes }
    }
}

/// A call ready to go: the adapter, the upstream request, the plan, the
/// estimate (prompt, completion), and the provider's route.
type Prepared = (
    &'static dyn Provider,
    Outbound,
    Plan,
    (u64, u64),
    Option<Route>,
);

/// The deployment `a` goes to, when its model is a pool's (chosen by
/// `layers/pool.rs`).
pub(super) fn target<'s>(state: &'s AppState, a: &Attempt) -> Option<&'s DeploymentState> {
    let j = a.deployment?;
    let pool = state.config.pool_index(&a.model)?;
    state
        .limits
        .pools
        .get(pool)
        .and_then(|p| p.deployments.get(j))
        .map(|d| &**d)
}

/// `a`'s call, ready to go.
fn prepare(state: &AppState, a: &Attempt) -> Result<Prepared, Failure> {
    let (c, model) = (&*a.call, a.model.as_str());
    let target = target(state, a);
    let index = match target {
        Some(d) => d.provider,
        None => c.provider_index_for(state, model)?,
    };
    let prov = &state.config.providers[index];
    // Found when the model was checked (`provider_index`), so always there.
    let adapter = providers::for_call(prov.format, c.endpoint).ok_or_else(|| {
        Failure::Limited(ApiError::bad_field(
            "model",
            format!(
                "{model:?} is served by {} in another wire format",
                prov.name
            ),
        ))
    })?;
    let cfg = &state.config;
    let est = adapter.estimate(
        c.endpoint,
        &c.json,
        cfg.tokens.chars_per_token,
        cfg.tokens.default_max_tokens,
    );
    // A deployment is limited on its own resources; a model on its name.
    let (requests, tokens, in_flight) = match target {
        Some(d) => (
            d.resource.clone(),
            d.tokens_limited.then(|| tokens_resource(&d.resource)),
            d.in_flight_limited.then(|| inflight_resource(&d.resource)),
        ),
        None => {
            let limits = state.config.model_limits(model);
            (
                model.to_owned(),
                limits
                    .and_then(|l| l.tokens_per_minute)
                    .map(|_| tokens_resource(model)),
                limits
                    .and_then(|l| l.max_in_flight)
                    .map(|_| inflight_resource(model)),
            )
        }
    };
    let mut needs = vec![(requests.clone(), 1)];
    if let Some(t) = &tokens {
        needs.push((t.clone(), est.total));
    }
    if let Some(f) = in_flight {
        needs.push((f, 1));
    }
    if let Some(thread) = &c.ctx.thread {
        needs.push((session_resource(&c.ctx.workspace, thread), 1));
    }
    // The key's and its tenant's own limits, taken with the model's.
    let caller = crate::keys::caller_needs(
        state.stores.keystore.as_ref(),
        &state.limits.shared,
        &c.ctx,
        Some(est.total),
    )?;
    needs.extend(caller.needs);
    let settle = tokens.iter().cloned().chain(caller.tokens).collect();
    let plan = Plan {
        needs,
        requests,
        tokens,
        settle,
        pool: "model",
        retryable: true,
        // A pooled call's failure goes up at once: the pool sends it to
        // another deployment first.
        once: target.is_some(),
        label: prov.name.clone(),
        name: model.to_owned(),
        provider: Some(adapter),
        // A transcript asked for as `text`, `srt` or `vtt` is not JSON.
        checks_answer: !c.stream && !answers_text(c.endpoint, &c.json),
    };
    // The tenant's own key, else the shared one where it is shared.
    let key = credentials::value_for(
        state.upstreams.credentials.provider(index),
        &c.ctx.workspace,
        "provider",
        &prov.name,
    )?;
    // Never sent without the key it takes: the caller would get the
    // provider's 401 as if its own key were wrong.
    if key.is_none() && prov.auth == crate::config::ProviderAuth::Key {
        return Err(credentials::not_configured(prov).into());
    }
    let call = providers::Call {
        endpoint: c.endpoint,
        body: &c.json,
        model: target.map_or_else(|| upstream_model(prov, model), |d| &d.upstream_model),
        stream: c.stream,
        headers: &c.headers,
        key: key.as_deref(),
        form: c.form.as_ref(),
        default_max_tokens: cfg.tokens.default_max_tokens,
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
    let estimate = (
        est.prompt_tokens,
        est.total.saturating_sub(est.prompt_tokens),
    );
    let route = state.upstreams.routes.provider(index);
    Ok((adapter, outbound, plan, estimate, route))
}

/// Whether a call's answer is text rather than a JSON object: a
/// transcript in one of its text formats.
fn answers_text(endpoint: sluice_usage::Endpoint, json: &serde_json::Value) -> bool {
    endpoint == sluice_usage::Endpoint::Transcriptions
        && matches!(
            json.get("response_format")
                .and_then(serde_json::Value::as_str),
            Some("text" | "srt" | "vtt")
        )
}

/// How to read the answer of a call.
struct Answer<'a> {
    adapter: &'static dyn Provider,
    exchange: &'a Exchange,
    /// The estimate (prompt, completion): what a stream cut before its
    /// usage came is charged for its input, and what the ledger records
    /// for an answer without usage.
    estimate: (u64, u64),
}

/// The most `a`'s call could use, whatever its upstream reports.
pub(super) fn ceiling(state: &AppState, a: &Attempt) -> sluice_usage::UsageCeiling {
    sluice_usage::UsageCeiling::of_request(
        a.call.endpoint,
        &a.call.json,
        state.config.tokens.max_call_tokens,
    )
}

/// The name of the provider `a`'s model goes to.
fn provider_name<'s>(state: &'s AppState, a: &Attempt) -> &'s str {
    if let Some(d) = target(state, a) {
        return &d.provider_name;
    }
    a.call
        .provider_for(state, &a.model)
        .map_or("", |p| p.name.as_str())
}

/// The model's name as its provider knows it.
pub(crate) fn upstream_model<'a>(prov: &ProviderConfig, model: &'a str) -> &'a str {
    if prov.strip_prefix {
        model
            .strip_prefix(prov.name.as_str())
            .and_then(|m| m.strip_prefix('/'))
            .unwrap_or(model)
    } else {
        model
    }
}

/// Reads the answer of `a`'s call: a stream passed on, or a whole answer.
async fn read(
    state: &AppState,
    a: &Attempt,
    answer: Answer<'_>,
    d: Delivery,
    notes: &mut Notes,
) -> Result<Reply, Failure> {
    let Answer {
        adapter,
        exchange,
        estimate,
    } = answer;
    let c = &*a.call;
    notes.meta.attempts += d.attempts;
    let queued = notes.admission.as_ref().map(|p| p.waited());
    notes.meta.queued = queued.unwrap_or_default() + d.waited;
    let status =
        StatusCode::from_u16(d.response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = pass_headers(d.response.headers());
    let is_sse = d
        .response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if c.stream && status.is_success() && is_sse {
        let mut trace = notes.trace.take();
        if let Some(t) = trace.as_mut() {
            t.status = status.as_u16();
            t.attempts = notes.meta.attempts;
        }
        let ledger = notes.ledger.take().map(|draft| stream::Pending {
            draft,
            state: state.clone(),
            status: status.as_u16(),
            queued: notes.meta.queued,
            attempts: notes.meta.attempts,
        });
        let relay = stream::Relay {
            reader: adapter.stream(exchange),
            deadline: c.ctx.deadline,
            route: route(c.endpoint),
            trace,
            writer: state.observers.traces.clone(),
            ledger,
            prompt_estimate: estimate.0,
            completion_reserved: estimate.1,
            cut_share: state.config.tokens.cut_stream_share,
            chars_per_token: state.config.tokens.chars_per_token,
            grace_over: Box::pin(state.grace.over_owned()),
            bound: stream::Bound {
                ceiling: ceiling(state, a),
                provider: provider_name(state, a).to_owned(),
                model: a.model.clone(),
            },
        };
        let mut res = relay.start(d);
        *res.status_mut() = status;
        *res.headers_mut() = headers;
        return Ok(Reply::Stream(res));
    }
    let attempts = d.attempts;
    // An answer whose body came with its head arms no timer.
    let bytes = crate::ready::by(
        c.ctx.deadline,
        axum::body::to_bytes(d.response.into_body(), usize::MAX),
    )
    .await
    .map_err(|_| Failure::Timeout { attempts })?
    .map_err(|e| Failure::Upstream {
        message: format!("reading the upstream body: {e}"),
        attempts,
    })?;
    let mut answer = adapter.answer(exchange, status, bytes);
    // Read from the provider's own body, before any translation.
    let mut details = if status.is_success() {
        answer.details
    } else {
        sluice_usage::Details::default()
    };
    answer.usage = bounded(
        &ceiling(state, a),
        provider_name(state, a),
        &a.model,
        answer.usage,
        &mut details,
    );
    d.reserved
        .settle_answer(answer.usage, answer.status.is_success());
    if let Some(draft) = notes.ledger.as_mut() {
        // An answer without usage cost its estimate, a failure nothing.
        let estimate = answer.status.is_success().then_some(estimate);
        draft.used(&state.spend.prices, answer.usage, estimate, details);
    }
    if let Some(t) = notes.trace.as_mut() {
        t.usage = answer.usage;
        t.tool_calls = answer.tool_calls;
        if let Some(o) = t.otel.as_mut() {
            o.model_ended(answer.usage, crate::otel::head_of(&answer.body), None);
        }
    }
    drop(d.pool);
    Ok(Reply::Buffered(Buffered {
        status: answer.status,
        headers,
        body: answer.body,
    }))
}

#[cfg(test)]
#[path = "provider/tests.rs"]
mod tests;
