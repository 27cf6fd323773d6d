//! Cache for proxied `GET`s of the APIs under `[cache.apis]`
//! (docs/cache.md): a repeated read is answered from the response cache
//! before admission, so it spends no queue slot and none of the API's
//! quota; a miss's answer is stored once its body has come through whole.
//!
//! What is stored: a `200` to a `GET` that was not conditional, unless the
//! upstream said `no-store`, `no-cache`, `Vary: *` or set a cookie; kept
//! for the API's TTL, cut to the upstream's `max-age`. The key holds the
//! tenant's scope, the full upstream URL and the request headers that can
//! change the answer, the credential sent upstream among them, so callers
//! with different tokens never share an entry.

mod stored;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode, header};
use sluice_usage::cache::{CacheKey, Scope};
use tokio::time::Instant;

use super::{Call, Incoming};
use crate::cache::control::{Control, control, not_cached, requested_ttl};
use crate::layers::step::{Step, StepLayer};
use crate::layers::{Next, Reply, Req, Served, call, observe};
use crate::metrics;
use crate::state::AppState;
use stored::{answer, tee, ttl};

/// Request headers that make a different answer, in key order. The
/// credential is added by [`ask`].
const VARY: &[&str] = &["accept", "accept-encoding", "x-github-api-version"];

/// What the cache does for one proxied call, decided when it is read.
#[derive(Debug)]
pub(crate) enum Ask {
    /// The API is not cached: nothing to do, nothing to count.
    Uncached,
    /// The API is cached but not this call (a write, a conditional read,
    /// or `x-sluice-cache: off`).
    Bypass,
    /// Looked up, and a miss stored.
    Lookup(Lookup),
}

/// A cacheable read.
#[derive(Debug)]
pub(crate) struct Lookup {
    key: CacheKey,
    scope: Scope,
    /// `api:{name}`: the entry's "model", for stats and invalidation.
    label: String,
    ttl: Duration,
    control: Control,
}

/// What the cache does for `call`, going to `url` with the `outgoing`
/// headers. The cache headers are checked on every proxied call, cached
/// API or not.
///
/// # Errors
/// 400 naming a bad cache header; 504 for `only-if-cached` on a call
/// that is never cached.
pub(super) fn ask(
    state: &AppState,
    workspace: &str,
    call: &Incoming,
    url: &str,
    outgoing: &HeaderMap,
) -> Result<Ask, crate::error::ApiError> {
    let control = control(&call.headers)?;
    let asked_ttl = requested_ttl(&call.headers, state.config.cache.max_ttl_seconds)?;
    let (api, method, client) = (call.api.as_str(), &call.method, &call.headers);
    let Some(ttl) = state.config.cache.for_api(api) else {
        return match control {
            Control::OnlyIfCached => Err(not_cached()),
            _ => Ok(Ask::Uncached),
        };
    };
    let conditional = ["if-none-match", "if-modified-since", "if-match", "range"]
        .iter()
        .any(|h| client.contains_key(*h));
    if *method != Method::GET || conditional || control == Control::Off {
        return match control {
            Control::OnlyIfCached => Err(not_cached()),
            _ => Ok(Ask::Bypass),
        };
    }
    let scope = state.config.cache.scope(workspace);
    let mut vary: Vec<(&str, &[u8])> = VARY
        .iter()
        .filter_map(|h| outgoing.get(*h).map(|v| (*h, v.as_bytes())))
        .collect();
    if let Some(auth) = outgoing.get(header::AUTHORIZATION) {
        vary.push(("authorization", auth.as_bytes()));
    }
    Ok(Ask::Lookup(Lookup {
        key: CacheKey::for_api_get(&scope, api, url, &vary),
        scope,
        label: format!("api:{api}"),
        ttl: asked_ttl.unwrap_or(ttl),
        control,
    }))
}

/// Wraps the proxy's path below in [`ApiCache`].
pub(crate) type ApiCacheLayer = StepLayer<ApiCache>;

/// See the module doc.
pub(crate) enum ApiCache {}

impl<S> Step<Req<Call>, S> for ApiCache
where
    S: Next<Req<Call>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: Req<Call>) -> Served<Reply> {
        serve(&state, inner, req).await
    }
}

async fn serve<S>(state: &AppState, inner: S, req: Req<Call>) -> Served<Reply>
where
    S: Next<Req<Call>, Served<Reply>>,
{
    let Req {
        call: mut c,
        mut notes,
    } = req;
    let tenant = c.ctx.workspace.clone();
    let started = Instant::now();
    let l = match std::mem::replace(&mut c.cache, Ask::Uncached) {
        Ask::Uncached => return call(inner, Req { call: c, notes }).await,
        Ask::Bypass => {
            observe::cache_looked(&mut notes, started, "bypass");
            state.spend.cache.record_bypass();
            state.spend.cache_tenants.bypass(&tenant);
            metrics::cache_lookup("bypass", &format!("api:{}", c.api));
            notes.meta.cache = Some("bypass");
            return call(inner, Req { call: c, notes }).await;
        }
        Ask::Lookup(l) => l,
    };
    if l.control != Control::Refresh
        && let Some(hit) = state.spend.cache.get(&l.key, true, None).await
    {
        observe::cache_looked(&mut notes, started, "hit");
        state.spend.cache_tenants.hit(&tenant, &hit);
        metrics::cache_hit(&l.label, None);
        return Served::ok(Reply::Cached(answer(&hit)), notes);
    }
    if l.control == Control::Refresh {
        state.spend.cache.record_miss();
    }
    observe::cache_looked(&mut notes, started, "miss");
    state.spend.cache_tenants.miss(&tenant);
    metrics::cache_lookup("miss", &l.label);
    if l.control == Control::OnlyIfCached {
        return Served::err(not_cached(), notes);
    }
    notes.meta.cache = Some("miss");
    let Served { result, notes } = call(inner, Req { call: c, notes }).await;
    let result = match result {
        Ok(Reply::Stream(res)) if res.status() == StatusCode::OK => {
            match ttl(res.headers(), l.ttl) {
                Some(ttl) => Ok(Reply::Stream(tee(
                    Arc::clone(&state.spend.cache),
                    l,
                    ttl,
                    res,
                ))),
                None => Ok(Reply::Stream(res)),
            }
        }
        other => other,
    };
    Served { result, notes }
}
