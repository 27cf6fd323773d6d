//! The lookup: what the client asked of the cache in its headers, what
//! the cache has, and the answer it makes; and, for a miss, storing the
//! answer that comes back.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use sluice_usage::cache::{
    Answer, CacheKey, Hit, NewEntry, Policy, Scope, SessionId, replay_stream,
};
use sluice_usage::{Endpoint, WireFormat};

use crate::cache::control::{Control, control, header, not_cached, requested_ttl};
use crate::cache::{CACHE_HEADER, SESSION_HEADER, SharedCache, TenantCounters};
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics;
use crate::response::Buffered;

/// What the cache made of a request.
pub(super) enum Looked {
    /// Answered from the cache.
    Hit(Response),
    /// Not looked up: send it as if there were no cache.
    Bypass,
    /// Looked up and missed (or `refresh`): send it, then store the answer.
    Miss(Pending),
}

/// A request the cache missed, to store the answer of.
pub(super) struct Pending {
    cache: SharedCache,
    key: CacheKey,
    scope: Scope,
    model: String,
    endpoint: Endpoint,
    format: WireFormat,
    /// Stored in the shared store (else only in the session's answers).
    in_store: bool,
    session: Option<SessionId>,
    ttl: Duration,
    stream: bool,
    include_usage: bool,
    /// The client asked for a new answer (`refresh`): never the stored one.
    refresh: bool,
    /// The client did not ask for the usage chunk that was asked upstream
    /// for the stored answer: it is taken out of what the client gets.
    strip_usage: bool,
}

/// The request's facts the cache needs.
pub(super) struct Asked<'a> {
    pub(super) endpoint: Endpoint,
    pub(super) tenant: &'a str,
    pub(super) provider: &'a str,
    /// The format of the answer the client gets (its route's).
    pub(super) format: WireFormat,
    pub(super) model: &'a str,
    pub(super) json: &'a Value,
    pub(super) headers: &'a HeaderMap,
}

/// Looks the request up. Every bad cache header is a 400 naming it, even
/// when the cache would not have been used.
///
/// # Errors
/// 400 for a bad header; 504 for `only-if-cached` with nothing cached.
pub(super) async fn lookup(
    cache: &SharedCache,
    counters: &Arc<TenantCounters>,
    config: &Config,
    req: Asked<'_>,
) -> Result<Looked, ApiError> {
    let control = control(req.headers)?;
    let settings = &config.cache;
    let asked_ttl = requested_ttl(req.headers, settings.max_ttl_seconds)?;
    let scope = settings.scope(req.tenant);
    let session = header(req.headers, &SESSION_HEADER)?
        .map(|id| {
            SessionId::new(scope.clone(), id)
                .map_err(|e| ApiError::bad_header(SESSION_HEADER.as_str(), e))
        })
        .transpose()?
        .filter(|_| settings.session_entries > 0);
    let rule = settings.for_model(req.model);
    let in_store = rule.policy.check(req.endpoint, req.json).is_ok();
    let usable = rule.policy != Policy::Off && (in_store || session.is_some());
    if control == Control::Off || !usable {
        if control == Control::OnlyIfCached {
            return Err(not_cached());
        }
        cache.record_bypass();
        counters.bypass(req.tenant);
        metrics::cache_lookup("bypass", req.model);
        return Ok(Looked::Bypass);
    }
    let key = CacheKey::for_request(&scope, req.provider, req.endpoint, req.json);
    let stream = sluice_usage::is_stream(req.json);
    let include_usage = req
        .json
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if control != Control::Refresh
        && let Some(hit) = cache.get(&key, in_store, session.as_ref()).await
    {
        counters.hit(req.tenant, &hit);
        metrics::cache_hit(req.model, hit.entry.usage());
        return Ok(Looked::Hit(answer(
            &hit,
            req.endpoint,
            stream,
            include_usage,
        )?));
    }
    if control == Control::Refresh {
        cache.record_miss();
    }
    counters.miss(req.tenant);
    metrics::cache_lookup("miss", req.model);
    if control == Control::OnlyIfCached {
        return Err(not_cached());
    }
    Ok(Looked::Miss(Pending {
        cache: Arc::clone(cache),
        key,
        scope,
        model: req.model.to_owned(),
        endpoint: req.endpoint,
        format: req.format,
        in_store,
        session,
        ttl: asked_ttl.unwrap_or(rule.ttl),
        stream,
        include_usage,
        refresh: control == Control::Refresh,
        strip_usage: false,
    }))
}

/// The response to a hit: the stored answer, or its replay as the stream
/// the client asked for.
fn answer(
    hit: &Hit,
    endpoint: Endpoint,
    stream: bool,
    include_usage: bool,
) -> Result<Response, ApiError> {
    let mut res = respond(hit.entry.answer(), endpoint, stream, include_usage)?;
    let h = res.headers_mut();
    h.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
    h.insert(header::AGE, HeaderValue::from(hit.age.as_secs()));
    Ok(res)
}

/// `stored` as the client asked for it: whole, or replayed as a stream.
pub(super) fn respond(
    stored: &Answer,
    endpoint: Endpoint,
    stream: bool,
    include_usage: bool,
) -> Result<Response, ApiError> {
    if stream && endpoint != Endpoint::Embeddings {
        let body = replay_stream(endpoint, &stored.body, include_usage)
            .map_err(|e| ApiError::Internal(format!("cached answer: {e}")))?;
        let mut res = Response::new(Body::from(body));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        return Ok(res);
    }
    let mut res = Response::new(Body::from(stored.body.clone()));
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            res.headers_mut().insert(name, value);
        }
    }
    Ok(res)
}

impl Pending {
    /// Whether the answer goes to the shared store: only such answers
    /// are shared with identical requests in flight (a sampled answer
    /// kept for one session is not).
    pub(super) fn shared(&self) -> bool {
        self.in_store
    }

    /// Its key.
    pub(super) fn key(&self) -> CacheKey {
        self.key
    }

    /// A second look once this request leads its flight: an identical
    /// request may have stored its answer between our lookup and now.
    /// Returns the response and the answer, to share with the flight.
    pub(super) async fn recheck(&self) -> Option<(Response, Answer)> {
        if !self.in_store || self.refresh {
            return None;
        }
        let hit = self.cache.peek(&self.key).await?;
        let res = answer(&hit, self.endpoint, self.stream, self.include_usage).ok()?;
        Some((res, hit.entry.answer().clone()))
    }

    /// The answer for this request from an identical one's answer.
    pub(super) fn serve(&self, shared: &Answer) -> Response {
        respond(shared, self.endpoint, self.stream, self.include_usage)
            .unwrap_or_else(axum::response::IntoResponse::into_response)
    }

    /// The whole answer to store for a buffered reply: only a 200 is.
    pub(super) fn whole(answer: &Buffered) -> Option<Answer> {
        if answer.status != StatusCode::OK {
            return None;
        }
        let headers = answer
            .headers
            .iter()
            .filter(|(name, _)| Answer::keep_header(name.as_str()))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect();
        Some(Answer {
            status: 200,
            headers,
            body: answer.body.clone(),
        })
    }

    /// Stores `answer` in the session's answers and the shared store, as
    /// this request may.
    pub(super) async fn keep(&self, answer: Answer) {
        let usage = sluice_usage::from_body(self.format, self.endpoint, &answer.body);
        let new = NewEntry {
            scope: self.scope.clone(),
            model: self.model.clone(),
            answer,
            usage,
            ttl: Some(self.ttl),
        };
        // Too large (or not a success): served, not stored.
        let Ok(entry) = self.cache.entry(new) else {
            return;
        };
        if let Some(session) = &self.session {
            self.cache.remember(session, self.key, Arc::clone(&entry));
        }
        if self.in_store {
            self.cache.put(self.key, entry).await;
        }
    }

    /// Asks upstream for the usage chunk of an OpenAI chat stream, so that
    /// the stored answer has its usage (a hit saves it, a replay that asks
    /// for it gets it); [`Pending::scanner`] takes it out again for a
    /// client that did not ask.
    pub(super) fn ask_usage(&mut self, body: &mut Value) {
        if self.stream && self.endpoint == Endpoint::Chat && self.format == WireFormat::Openai {
            self.strip_usage = !sluice_usage::request_usage_in_stream(body);
        }
    }

    /// What passes the client's stream through: the usage chunk taken out
    /// when only the cache asked for it.
    pub(super) fn scanner(&self) -> sluice_usage::StreamScanner {
        sluice_usage::StreamScanner::new(self.format, self.endpoint, self.strip_usage)
    }

    /// The endpoint and the cache's largest entry, for a stream capture.
    pub(super) fn capture(&self) -> sluice_usage::cache::StreamCapture {
        let max = self.cache.config().max_entry_bytes;
        sluice_usage::cache::StreamCapture::new(self.endpoint, max)
    }
}
