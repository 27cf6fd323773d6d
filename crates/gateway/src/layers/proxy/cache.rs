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

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use sluice_usage::cache::{Answer, CacheKey, Hit, NewEntry, Scope};
use tokio::time::Instant;

use super::{Call, Incoming};
use crate::cache::control::{Control, control, not_cached, requested_ttl};
use crate::cache::{CACHE_HEADER, SharedCache};
use crate::layers::step::{Step, StepLayer};
use crate::layers::{Next, Reply, Req, Served, call, observe};
use crate::metrics;
use crate::response::REPRESENTATION_HEADERS;
use crate::state::AppState;

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
            state.cache.record_bypass();
            state.cache_tenants.bypass(&tenant);
            metrics::cache_lookup("bypass", &format!("api:{}", c.api));
            notes.meta.cache = Some("bypass");
            return call(inner, Req { call: c, notes }).await;
        }
        Ask::Lookup(l) => l,
    };
    if l.control != Control::Refresh
        && let Some(hit) = state.cache.get(&l.key, true, None).await
    {
        observe::cache_looked(&mut notes, started, "hit");
        state.cache_tenants.hit(&tenant, &hit);
        metrics::cache_hit(&l.label, None);
        return Served::ok(Reply::Cached(answer(&hit)), notes);
    }
    if l.control == Control::Refresh {
        state.cache.record_miss();
    }
    observe::cache_looked(&mut notes, started, "miss");
    state.cache_tenants.miss(&tenant);
    metrics::cache_lookup("miss", &l.label);
    if l.control == Control::OnlyIfCached {
        return Served::err(not_cached(), notes);
    }
    notes.meta.cache = Some("miss");
    let Served { result, notes } = call(inner, Req { call: c, notes }).await;
    let result = match result {
        Ok(Reply::Stream(res)) if res.status() == StatusCode::OK => {
            match ttl(res.headers(), l.ttl) {
                Some(ttl) => Ok(Reply::Stream(tee(Arc::clone(&state.cache), l, ttl, res))),
                None => Ok(Reply::Stream(res)),
            }
        }
        other => other,
    };
    Served { result, notes }
}

/// The stored answer as a response, with `x-sluice-cache: hit` and `age`.
fn answer(hit: &Hit) -> Response {
    let stored = hit.entry.answer();
    let mut res = Response::new(Body::from(stored.body.clone()));
    let h = res.headers_mut();
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.insert(name, value);
        }
    }
    h.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
    h.insert(header::AGE, HeaderValue::from(hit.age.as_secs()));
    res
}

/// How long an upstream answer may be kept: `ours`, cut to its
/// `max-age`; `None` when it must not be stored at all.
fn ttl(headers: &HeaderMap, ours: Duration) -> Option<Duration> {
    if headers.contains_key(header::SET_COOKIE) {
        return None;
    }
    let vary_all = headers
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim() == "*");
    if vary_all {
        return None;
    }
    let mut ttl = ours;
    for directive in headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let (name, value) = match directive.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (directive.trim(), None),
        };
        if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
            return None;
        }
        if name.eq_ignore_ascii_case("max-age") {
            // An unreadable max-age is treated as 0: not stored.
            let seconds = value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ttl = ttl.min(Duration::from_secs(seconds));
        }
    }
    (!ttl.is_zero()).then_some(ttl)
}

/// `res` with its body captured on the way to the client and stored
/// once it has ended properly and whole (at most the cache's largest
/// entry; a body that fails, is cut or is larger is passed on, never
/// stored).
fn tee(cache: SharedCache, l: Lookup, ttl: Duration, res: Response) -> Response {
    let (parts, body) = res.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| REPRESENTATION_HEADERS.contains(&name.as_str()))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let max = usize::try_from(cache.config().max_entry_bytes).unwrap_or(usize::MAX);
    // Stored as soon as the declared length has come, before the last
    // chunk goes out: a client that has read the whole body finds the
    // entry there.
    let length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let tap = Tap {
        cache,
        lookup: l,
        ttl,
        headers,
        body: Some(Vec::new()),
        max,
        length,
    };
    let stream =
        futures_util::stream::unfold(Some((body.into_data_stream(), tap)), |state| async move {
            let (mut inner, mut tap) = state?;
            match inner.next().await {
                Some(Ok(chunk)) => {
                    tap.push(&chunk);
                    if tap.length.is_some() && tap.body.as_ref().map(Vec::len) == tap.length {
                        tap.finish().await;
                    }
                    Some((Ok(chunk), Some((inner, tap))))
                }
                Some(Err(e)) => Some((Err(std::io::Error::other(e)), None)),
                None => {
                    tap.finish().await;
                    None
                }
            }
        });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// A miss's body on its way through.
struct Tap {
    cache: SharedCache,
    lookup: Lookup,
    ttl: Duration,
    headers: Vec<(String, String)>,
    /// `None` once it grew past `max` or was stored.
    body: Option<Vec<u8>>,
    max: usize,
    /// The upstream's `content-length`, when it gave one.
    length: Option<usize>,
}

impl Tap {
    fn push(&mut self, chunk: &Bytes) {
        if let Some(b) = &mut self.body {
            if b.len() + chunk.len() > self.max {
                self.body = None;
            } else {
                b.extend_from_slice(chunk);
            }
        }
    }

    /// Stores the body (once).
    async fn finish(&mut self) {
        let Some(body) = self.body.take() else { return };
        if self.length.is_some_and(|n| n != body.len()) {
            return;
        }
        let new = NewEntry {
            scope: self.lookup.scope.clone(),
            model: self.lookup.label.clone(),
            answer: Answer {
                status: 200,
                headers: std::mem::take(&mut self.headers),
                body: Bytes::from(body),
            },
            usage: None,
            ttl: Some(self.ttl),
        };
        if let Ok(entry) = self.cache.entry(new) {
            self.cache.put(self.lookup.key, entry).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn upstream_cache_control_cuts_or_forbids_storing() {
        let ours = Duration::from_secs(600);
        let ttl = |pairs: &[(&str, &str)]| ttl(&headers(pairs), ours);
        assert_eq!(ttl(&[]), Some(ours));
        assert_eq!(
            ttl(&[("cache-control", "private, max-age=60, s-maxage=60")]),
            Some(Duration::from_secs(60))
        );
        assert_eq!(ttl(&[("cache-control", "max-age=86400")]), Some(ours));
        assert_eq!(ttl(&[("cache-control", "max-age=0")]), None);
        assert_eq!(ttl(&[("cache-control", "max-age=soon")]), None);
        assert_eq!(ttl(&[("cache-control", "No-Store")]), None);
        assert_eq!(
            ttl(&[("cache-control", "public"), ("cache-control", "no-cache")]),
            None
        );
        assert_eq!(ttl(&[("vary", "Accept, *")]), None);
        assert_eq!(ttl(&[("vary", "Accept, Authorization")]), Some(ours));
        assert_eq!(ttl(&[("set-cookie", "a=b")]), None);
    }
}
