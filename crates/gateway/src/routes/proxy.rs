//! `ANY /proxy/{api}/{*path}`: a configured SaaS API, under its limits.
//!
//! Requests only ever go to the API's configured base URL: the path is
//! appended to it segment by segment, decoded once, and can never leave it
//! (see [`target`]).

mod target;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::auth::Tenant;
use crate::body::Body;
use crate::context::Context;
use crate::credentials;
use crate::error::ApiError;
use crate::metrics;
use crate::response::{Meta, pass_headers};
use crate::state::{AppState, inflight_resource};
use crate::trace::Trace;
use crate::upstream::{self, Plan};

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

/// The handler.
pub async fn proxy(
    State(state): State<AppState>,
    tenant: Tenant,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Body(body): Body,
) -> Response {
    let started = tokio::time::Instant::now();
    let mut meta = Meta::default();
    let mut trace = None;
    let mut workspace = None;
    // The path as sent, still encoded: decoded here, once (see `target`).
    let (api, rest) = match target::split(uri.path()) {
        Ok(split) => split,
        Err(e) => return e.into_response(),
    };
    let call = Call {
        tenant: &tenant,
        api: &api,
        rest,
        query: uri.query(),
        method,
        headers: &headers,
    };
    let ran = run(&state, call, body, &mut meta, &mut workspace, &mut trace).await;
    let (mut res, error) = match ran {
        Ok(r) => (r, None),
        Err(e) => {
            let msg = e.to_string();
            (e.into_response(), Some(msg))
        }
    };
    meta.apply(&mut res);
    let status = res.status().as_u16();
    let known = state.config.api(&api).is_some();
    let label = if known { api.as_str() } else { "-" };
    state
        .metrics
        .request(ROUTE, label, status, workspace.as_deref());
    metrics::request_duration(ROUTE, started.elapsed().as_secs_f64());
    if let (Some(mut t), Some(w)) = (trace, &state.traces) {
        t.status = status;
        t.attempts = meta.attempts;
        t.error = error;
        w.submit(t.finish());
    }
    res
}

/// What a proxied request asks for.
struct Call<'a> {
    tenant: &'a Tenant,
    /// The API's name, decoded.
    api: &'a str,
    /// The path below the API's name, still encoded.
    rest: &'a str,
    query: Option<&'a str>,
    method: Method,
    headers: &'a HeaderMap,
}

async fn run(
    state: &AppState,
    call: Call<'_>,
    body: Bytes,
    meta: &mut Meta,
    workspace: &mut Option<String>,
    trace: &mut Option<Trace>,
) -> Result<Response, ApiError> {
    let Call {
        tenant,
        api,
        rest,
        query,
        method,
        headers,
    } = call;
    state.check_open()?;
    let ctx = Context::from_headers(state, tenant, headers)?;
    meta.request_id = ctx.request_id.clone();
    *workspace = Some(ctx.workspace.clone());
    let cfg = state.config.api(api).ok_or_else(|| {
        ApiError::NotFound(format!("unknown API {api:?}: configure it under [[apis]]"))
    })?;
    let url = target::upstream_url(&cfg.base_url, rest, query)?;
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
    needs.extend(crate::keys::caller_needs(state, &ctx, None)?.needs);
    // Only calls that are safe to repeat are retried.
    let idempotent = matches!(
        method,
        Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS
    ) || headers.contains_key("idempotency-key");
    let plan = Plan {
        needs,
        requests: resource,
        tokens: None,
        pool: "api",
        retryable: idempotent,
        label: api.to_owned(),
        provider: None,
    };
    // The tenant's own token, else the shared one where it is shared;
    // never another tenant's.
    let token = credentials::value_for(state.credentials.api(api), &ctx.workspace, "API", api)?;
    // Without tenants, the client's own credentials go upstream; with
    // tenants, `Authorization` is the tenant's Sluice key and stays here.
    let client_auth = if state.is_open() {
        headers.get("authorization").cloned()
    } else {
        None
    };
    let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).map_err(|_| {
        ApiError::BadRequest {
            message: "unsupported method".into(),
            param: None,
        }
    })?;
    let send = || {
        let mut r = state
            .client
            .request(method.clone(), url.clone())
            .body(body.clone());
        for name in FORWARDED {
            if let Some(v) = headers.get(*name) {
                r = r.header(*name, v.as_bytes());
            }
        }
        if let Some(t) = &token {
            r = r.bearer_auth(t);
        } else if let Some(a) = &client_auth {
            r = r.header("authorization", a.as_bytes());
        }
        ctx.propagate(r)
    };
    // Traced from here on: a request refused for its path, method or API
    // costs no disk (`sluice_requests_total` counts it by status).
    *trace = Some(Trace::start(
        ctx.request_id.clone(),
        ctx.workspace.clone(),
        ctx.thread
            .clone()
            .unwrap_or_else(|| "unthreaded".to_owned()),
        format!("{ROUTE}/{api}"),
    ));
    if let Some(t) = trace.as_mut() {
        t.trace_id = ctx.trace.trace_id_hex();
    }
    // The same admission queue as model calls: priorities, per-tenant
    // fairness and depth limits, in the API's own lane. Proxied bodies
    // stream, so nothing is shared between duplicates here.
    let ticket = sluice_admit::Ticket::new(ctx.workspace.clone(), ctx.deadline)
        .with_priority(ctx.priority)
        .with_lane(plan.requests.as_str());
    let mut permit = match state.queue.admit(ticket).await? {
        sluice_admit::Admission::Run(p) => p,
        // Only tickets with a dedup key can join; this one has none.
        sluice_admit::Admission::Joined(_) => {
            return Err(ApiError::Internal("joined a flight without a key".into()));
        }
    };
    let mut log = Vec::new();
    let mut granted = || permit.dispatched();
    let called = upstream::call(state, &plan, ctx.deadline, &mut log, &mut granted, send).await;
    drop(permit);
    if let Some(t) = trace.as_mut() {
        upstream::record_attempts(t, &log, api, api);
    }
    let answered = called.map_err(|f| {
        meta.attempts += f.attempts();
        f.into_error(api)
    })?;
    meta.attempts += answered.attempts;
    meta.queued = answered.waited;
    let status = StatusCode::from_u16(answered.response.status().as_u16())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = pass_headers(answered.response.headers());
    let grant = answered.grant;
    let permit = answered.permit;
    let stream = answered.response.bytes_stream().map(move |chunk| {
        // Held until the body is done (or the client leaves).
        let _ = (&grant, &permit);
        chunk.map_err(std::io::Error::other)
    });
    let mut res = Response::new(axum::body::Body::from_stream(stream));
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    Ok(res)
}
