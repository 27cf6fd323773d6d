//! What a request says about itself in its headers, read into its
//! [`Context`] (which, with the request id and the trace context it
//! carries upstream, is named in `request.rs`).

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use sluice_admit::Priority;
use sluice_limit::headers::context::{TraceParent, valid_tracestate};
use tokio::time::Instant;

use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::request::{Context, new_id, new_span_id, request_id, traceparent};
use crate::state::AppState;

// The headers read per request, named once: a lookup by `&str` parses
// and checks the name every time.
const PRIORITY: HeaderName = HeaderName::from_static("x-sluice-priority");
const THREAD: HeaderName = HeaderName::from_static("x-sluice-thread");
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const TIMEOUT_MS: HeaderName = HeaderName::from_static("x-sluice-timeout-ms");
const USER: HeaderName = HeaderName::from_static("x-sluice-user");
const FEATURE: HeaderName = HeaderName::from_static("x-sluice-feature");

/// The headers [`Context::from_headers`] reads, found in one pass over
/// the request's headers: a lookup by name hashes the name (none of them
/// is a standard header, which would hash by its index), nine lookups
/// cost more than comparing the few names a request has. The first value
/// of a name counts, as [`HeaderMap::get`] gives it.
#[derive(Default)]
struct Found<'a> {
    priority: Option<&'a HeaderValue>,
    thread: Option<&'a HeaderValue>,
    request_id: Option<&'a HeaderValue>,
    idempotency_key: Option<&'a HeaderValue>,
    timeout_ms: Option<&'a HeaderValue>,
    traceparent: Option<&'a HeaderValue>,
    tracestate: Option<&'a HeaderValue>,
    user: Option<&'a HeaderValue>,
    feature: Option<&'a HeaderValue>,
}

impl<'a> Found<'a> {
    fn read(headers: &'a HeaderMap) -> Found<'a> {
        let mut found = Found::default();
        for (name, value) in headers {
            let name = name.as_str();
            // Every name read here starts with `x`, `t` or `i`; most of a
            // request's others (`host`, `content-*`, `authorization`,
            // `accept`, `user-agent`) are passed by their first byte.
            if !matches!(name.as_bytes().first(), Some(b'x' | b't' | b'i')) {
                continue;
            }
            let slot = match name {
                "x-sluice-priority" => &mut found.priority,
                "x-sluice-thread" => &mut found.thread,
                "x-request-id" => &mut found.request_id,
                "idempotency-key" => &mut found.idempotency_key,
                "x-sluice-timeout-ms" => &mut found.timeout_ms,
                "traceparent" => &mut found.traceparent,
                "tracestate" => &mut found.tracestate,
                "x-sluice-user" => &mut found.user,
                "x-sluice-feature" => &mut found.feature,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        found
    }
}

/// A tag header (`x-sluice-user`, `x-sluice-feature`): absent or empty is
/// none; longer than [`MAX_ID`] is refused.
fn tag(value: Option<&HeaderValue>, name: &HeaderName) -> Result<Option<String>, ApiError> {
    let value = header(value, name)?.filter(|v| !v.is_empty());
    if value.is_some_and(|v| v.len() > MAX_ID) {
        return Err(ApiError::bad_header(
            name.as_str(),
            format!("longer than {MAX_ID}"),
        ));
    }
    Ok(value.map(str::to_owned))
}

/// `value` of header `name`, trimmed; 400 naming it when it is not
/// visible ASCII.
fn header<'a>(
    value: Option<&'a HeaderValue>,
    name: &HeaderName,
) -> Result<Option<&'a str>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| ApiError::bad_header(name.as_str(), "not visible ASCII")),
    }
}

/// Refuses `high` priority to a caller that may not ask for it: `high`
/// jumps every other tenant's queue, so it is a permission (a static
/// tenant's `high_priority = true`, or a key or tenant of the key store
/// whose own default priority is `high`), not a caller's say-so. An open
/// gateway's callers are all trusted. `what` names where it was asked.
///
/// # Errors
/// 403 naming `what`.
pub(crate) fn check_priority(
    state: &AppState,
    tenant: &Tenant,
    priority: Priority,
    what: &str,
) -> Result<(), ApiError> {
    if priority != Priority::High || state.is_open() {
        return Ok(());
    }
    let allowed = match tenant.caller() {
        Some(c) => c.priority() == Some("high"),
        None => state
            .config
            .tenants
            .iter()
            .any(|t| t.name == tenant.name() && t.high_priority),
    };
    if allowed {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "{what}: `high` priority is not allowed for this tenant (set `high_priority = true` \
         under its [[tenants]], or `priority = \"high\"` on its key or tenant in the key store)"
    )))
}

/// Longest header value used as a key or a file name.
const MAX_ID: usize = 256;

impl Context {
    /// Reads and checks the headers of `tenant`'s request (authenticated
    /// already, by its extractor).
    ///
    /// # Errors
    /// 400 naming a bad header.
    pub fn from_headers(
        state: &AppState,
        tenant: &Tenant,
        headers: &HeaderMap,
    ) -> Result<Context, ApiError> {
        let started = Instant::now();
        let workspace = tenant.name().to_owned();
        let caller = tenant.caller().cloned();
        // A key or tenant may set the priority of requests that name none
        // (checked when it was stored).
        let default_priority = caller
            .as_ref()
            .and_then(|c| c.priority())
            .and_then(|p| p.parse().ok())
            .unwrap_or(Priority::Normal);
        let found = Found::read(headers);
        let priority = match header(found.priority, &PRIORITY)? {
            None | Some("") => default_priority,
            Some(p) => {
                let p = p
                    .parse()
                    .map_err(|e| ApiError::bad_header("x-sluice-priority", e))?;
                check_priority(state, tenant, p, "header `x-sluice-priority`")?;
                p
            }
        };
        let thread = header(found.thread, &THREAD)?
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if thread.as_ref().is_some_and(|t| t.len() > MAX_ID) {
            return Err(ApiError::bad_header(
                "x-sluice-thread",
                format!("longer than {MAX_ID}"),
            ));
        }
        let id = match request_id(found.request_id) {
            Some(id) => Some(("x-request-id", id)),
            None => header(found.idempotency_key, &IDEMPOTENCY_KEY)?
                .filter(|k| !k.is_empty())
                .map(|k| ("idempotency-key", k)),
        };
        if let Some((name, id)) = id
            && id.len() > MAX_ID
        {
            return Err(ApiError::bad_header(name, format!("longer than {MAX_ID}")));
        }
        let cfg = &state.config;
        let timeout_ms = match header(found.timeout_ms, &TIMEOUT_MS)? {
            None | Some("") => cfg.default_timeout_ms,
            Some(t) => {
                let ms: u64 = t.parse().map_err(|_| {
                    ApiError::bad_header(
                        "x-sluice-timeout-ms",
                        "not a whole number of milliseconds",
                    )
                })?;
                if ms == 0 {
                    return Err(ApiError::bad_header(
                        "x-sluice-timeout-ms",
                        "must be at least 1",
                    ));
                }
                ms.min(cfg.max_timeout_ms)
            }
        };
        let (trace, parent_span, tracestate) = trace_context(
            found.traceparent,
            found.tracestate,
            state.observers.otel.as_ref(),
        );
        let user = tag(found.user, &USER)?;
        let feature = tag(found.feature, &FEATURE)?;
        Ok(Context {
            workspace,
            priority,
            thread,
            trace,
            parent_span,
            tracestate,
            client_id: id.is_some(),
            request_id: id.map_or_else(new_id, |(_, id)| id.to_owned()),
            deadline: started + Duration::from_millis(timeout_ms),
            started,
            caller,
            user,
            feature,
        })
    }
}

/// The request's span, the client's span and `tracestate` (see
/// [`Context::trace`]), from the request's `traceparent` and `tracestate`.
/// A new trace is sampled (flag `01`, sent upstream) when `otel` exports
/// it; a client's trace keeps the client's flags.
fn trace_context(
    parent: Option<&HeaderValue>,
    state: Option<&HeaderValue>,
    otel: Option<&sluice_otel::Exporter>,
) -> (TraceParent, Option<[u8; 8]>, Option<String>) {
    match traceparent(parent) {
        Some(parent) => {
            let state = state
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|s| !s.is_empty() && valid_tracestate(s))
                .map(str::to_owned);
            (parent.child(new_span_id()), Some(parent.span_id), state)
        }
        // A new trace, not sampled unless an exporter records it.
        None => {
            let id = fastrand::u128(..).to_be_bytes();
            let sampled = otel.is_some_and(|e| e.sampled(&id, None));
            (
                TraceParent::new(id, new_span_id(), u8::from(sampled)),
                None,
                None,
            )
        }
    }
}
