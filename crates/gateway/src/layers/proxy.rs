//! The proxy route's stack (`ANY /proxy/{api}/{*path}`: a configured SaaS
//! API under its limits), composed here and nowhere else, and the request
//! as its layers see it.
//!
//! Requests only ever go to the API's configured base URL: the path is
//! appended to it segment by segment, decoded once, and can never leave it
//! (see [`target`]).

mod cache;
mod forward;
pub(crate) mod target;

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method};
use sluice_admit::Ticket;
use sluice_usage::budget::{Rule, Spend};
use tower::ServiceBuilder;

use super::admission::{AdmissionLayer, Queued};
use super::budget::{BudgetLayer, Budgeted};
use super::context::{Context, ContextLayer, Parse};
use super::observe::{ObserveLayer, Routed};
use super::step::Stateful;
use super::upstream::{Outgoing, Plan, Upstream};
use super::wire::attempts;
use super::{Next, Notes, Reply};
use crate::credentials;
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::ledger::Draft;
use crate::limits::resources::inflight_resource;
use crate::state::AppState;
use cache::{ApiCacheLayer, Ask};
use forward::ForwardLayer;

/// The route, as metrics name it.
const ROUTE: &str = "/proxy";

/// Request headers passed upstream; everything else (hop-by-hop headers,
/// Sluice's own, the tenant's key) stays here.
const FORWARDED: &[&str] = &[
    "accept",
    "content-type",
    "content-encoding",
    "accept-encoding",
    "user-agent",
    "idempotency-key",
    "if-match",
    "if-none-match",
    "x-github-api-version",
];

/// The stack of the proxy route: the request path, top to bottom (it
/// holds nothing: see [`super::step`]).
pub(crate) fn stack() -> impl Next<Incoming, axum::response::Response> {
    ServiceBuilder::new()
        .layer(ObserveLayer)
        .layer(ContextLayer::new())
        .layer(ApiCacheLayer::new())
        .layer(AdmissionLayer::new())
        .layer(BudgetLayer::new())
        .layer(ForwardLayer::new())
        .service(attempts())
}

/// A proxied call as its handler hands it over.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// The gateway's state, brought down the stack.
    pub state: AppState,
    /// The caller.
    pub tenant: Tenant,
    /// The method.
    pub method: Method,
    /// The API's name, decoded.
    pub api: String,
    /// The path below the API's name, still encoded.
    pub rest: String,
    /// The query, as sent.
    pub query: Option<String>,
    /// The client's headers.
    pub headers: HeaderMap,
    /// The body, passed on as is.
    pub body: Bytes,
}

/// A proxied call, read and checked.
#[derive(Debug)]
pub(crate) struct Call {
    /// The request's context.
    pub ctx: Context,
    /// The API's name.
    pub api: String,
    /// The upstream call (shared by the layers below and every attempt).
    pub upstream: Arc<Upstream>,
    /// What the response cache does for it.
    pub cache: Ask,
}

impl Stateful for Incoming {
    fn state(&self) -> &AppState {
        &self.state
    }
}

impl Routed for Incoming {
    fn route(&self) -> &'static str {
        ROUTE
    }

    fn label(&self, state: &AppState) -> Option<String> {
        state.config.api(&self.api).map(|_| self.api.clone())
    }
}

impl Queued for Call {
    fn ticket(&self) -> Ticket {
        // The same queue as model calls (priorities, per-tenant fairness,
        // depth limits) in the API's own lane. Proxied bodies stream, so
        // nothing is shared between duplicates: no dedup key.
        self.ctx
            .ticket()
            .with_lane(self.upstream.plan.requests.as_str())
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }
}

impl Budgeted for Call {
    fn ctx(&self) -> &Context {
        &self.ctx
    }

    /// An API's answer carries no tokens and has no price: only request
    /// budgets count it.
    fn counts_in(rule: &Rule) -> bool {
        rule.caps.requests.is_some()
    }

    fn worst_case(&self, _: &AppState, _: &[Rule]) -> Result<Spend, ApiError> {
        Ok(Spend {
            requests: 1,
            ..Spend::default()
        })
    }

    /// A call the API answered without an error status spent its
    /// request; any other gives it back, as a failed model call does.
    fn keeps(result: &Result<Reply, ApiError>) -> bool {
        matches!(result, Ok(Reply::Stream(res)) if !res.status().is_client_error() && !res.status().is_server_error())
    }
}

impl Parse for Incoming {
    type Parsed = Call;

    fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    fn parse(self, state: &AppState, ctx: Context, notes: &mut Notes) -> Result<Call, ApiError> {
        let api = self.api.as_str();
        let cfg = state.config.api(api).ok_or_else(|| {
            ApiError::NotFound(format!("unknown API {api:?}: configure it under [[apis]]"))
        })?;
        let url = target::upstream_url(&cfg.base_url, &self.rest, self.query.as_deref())?;
        if let Some(c) = &ctx.caller
            && !c.allows_api(api)
        {
            return Err(ApiError::Forbidden(format!(
                "API {api:?} is not allowed for this API key (its `apis` allow-list)"
            )));
        }
        let resource = sluice_limit::api_resource(api);
        let mut needs = vec![(resource.clone(), 1)];
        if cfg.max_in_flight.is_some() {
            needs.push((inflight_resource(&resource), 1));
        }
        // The key's and its tenant's own limits, taken with the API's.
        needs.extend(
            crate::keys::caller_needs(
                state.stores.keystore.as_ref(),
                &state.limits.shared,
                &ctx,
                None,
            )?
            .needs,
        );
        // Only calls that are safe to repeat are retried.
        let idempotent = matches!(
            self.method,
            Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS
        ) || self.headers.contains_key("idempotency-key");
        let plan = Plan {
            needs,
            requests: resource,
            tokens: None,
            settle: Vec::new(),
            pool: "api",
            retryable: idempotent,
            once: false,
            label: api.to_owned(),
            name: api.to_owned(),
            provider: None,
            checks_answer: false,
        };
        let headers = outgoing_headers(state, &ctx, api, &self.headers)?;
        let cache = cache::ask(state, &ctx.workspace, &self, url.as_str(), &headers)?;
        let method =
            reqwest::Method::from_bytes(self.method.as_str().as_bytes()).map_err(|_| {
                ApiError::BadRequest {
                    message: "unsupported method".into(),
                    param: None,
                }
            })?;
        // Traced from here on: a request refused for its path, method or
        // API costs no disk (`sluice_requests_total` counts it by status).
        let trace = super::observe::begin_trace(
            state,
            &ctx,
            format!("{ROUTE}/{api}"),
            method.as_str().to_owned(),
        );
        notes.trace = Some(trace);
        if state.observers.ledger.as_ref().is_some() {
            let mut draft = Draft::api(&ctx, api, &format!("{ROUTE}/{api}"));
            draft.keep_bodies(&state.config.request_log, &self.body);
            notes.ledger = Some(draft);
        }
        let deadline = ctx.deadline;
        let context = Some(ctx.clone());
        Ok(Call {
            ctx,
            upstream: Arc::new(Upstream {
                plan,
                outgoing: Outgoing::new(method, url, headers, self.body, context)
                    .map_err(|e| ApiError::BadRequest {
                        message: format!("the upstream URL cannot be sent to: {e}"),
                        param: None,
                    })?
                    .by(state.upstreams.routes.api(api)),
                deadline,
            }),
            api: self.api,
            cache,
        })
    }
}

/// The headers sent upstream: the forwarded ones and the credential.
fn outgoing_headers(
    state: &AppState,
    ctx: &Context,
    api: &str,
    client: &HeaderMap,
) -> Result<HeaderMap, ApiError> {
    let mut out = HeaderMap::new();
    for name in FORWARDED {
        if let Some(v) = client.get(*name) {
            out.insert(*name, v.clone());
        }
    }
    // The tenant's own token, else the shared one where it is shared;
    // never another tenant's.
    let token = credentials::value_for(
        state.upstreams.credentials.api(api),
        &ctx.workspace,
        "API",
        api,
    )?;
    if let Some(t) = token {
        let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
            ApiError::BadGateway(format!(
                "the token of API {api:?} is not a valid header value"
            ))
        })?;
        v.set_sensitive(true);
        out.insert(axum::http::header::AUTHORIZATION, v);
    } else if state.is_open()
        && let Some(a) = client.get(axum::http::header::AUTHORIZATION)
    {
        // Without tenants, the client's own credentials go upstream; with
        // tenants, `Authorization` is the tenant's Sluice key and stays here.
        out.insert(axum::http::header::AUTHORIZATION, a.clone());
    }
    Ok(out)
}

#[cfg(test)]
#[path = "proxy/tests.rs"]
mod tests;
