//! `GET /v1/jobs/events`: job events as server-sent events, read from the
//! store's event table (`sluice_jobs::events`), so that every replica
//! streams every replica's events, in commit order, and a client that
//! reconnects with `Last-Event-ID` misses none that are still kept.
//!
//! A tenant sees its own jobs' events; the admin token sees every
//! tenant's (or one: `?tenant=`). Filters: `queue`, `kind`, `job`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use sluice_jobs::JobId;
use sluice_jobs::events::{EventCursor, EventFilter};

use super::{store, store_error};
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::state::AppState;

/// How often a stream looks for new events when it has read them all.
pub const EVENTS_POLL: Duration = Duration::from_millis(50);
/// The most events one look reads.
const PAGE: u32 = 500;
/// The most event streams open at once in this process; more are 503.
pub const MAX_EVENT_STREAMS: usize = 256;
/// A comment line after this long without events, so that proxies keep
/// the connection open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a stream waits after the store failed before it reads again
/// (from the same cursor: nothing is skipped).
const AFTER_ERROR: Duration = Duration::from_secs(1);

static STREAMS: AtomicUsize = AtomicUsize::new(0);

/// One open stream, counted until it is dropped.
struct Open;

impl Open {
    fn take() -> Option<Open> {
        STREAMS
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_EVENT_STREAMS).then_some(n + 1)
            })
            .ok()
            .map(|_| Open)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        STREAMS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The filter of a query: `queue`, `kind`, `job`, and for the admin `tenant`.
fn filter(query: &HashMap<String, String>, admin: bool) -> Result<EventFilter, ApiError> {
    let mut f = EventFilter::default();
    for (key, value) in query {
        if value.is_empty() || value.len() > sluice_jobs::MAX_NAME_LEN {
            return Err(ApiError::bad_field(key, "must be 1 to 200 bytes"));
        }
        match key.as_str() {
            "queue" => f.queue = Some(value.clone()),
            "kind" => f.kind = Some(value.clone()),
            "job" => {
                f.job = Some(JobId(value.parse().map_err(|_| {
                    ApiError::bad_field("job", format!("{value:?} is not a job id (an integer)"))
                })?));
            }
            "tenant" if admin => f.tenant = Some(value.clone()),
            "tenant" => {
                return Err(ApiError::bad_field(
                    "tenant",
                    "is the admin's filter: a tenant sees its own jobs' events",
                ));
            }
            other => {
                return Err(ApiError::bad_field(
                    other,
                    "unknown parameter: queue, kind, job (and tenant for the admin)",
                ));
            }
        }
    }
    Ok(f)
}

/// `GET /v1/jobs/events`: the calling tenant's jobs' events.
pub(crate) async fn events(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    stream_events(state, Some(tenant), headers, query).await
}

/// `GET /v1/jobs/events/all`: every tenant's (or `tenant=`'s), for the
/// operator.
pub(crate) async fn events_all(
    State(state): State<AppState>,
    _: crate::layers::auth::Admin,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    stream_events(state, None, headers, query).await
}

async fn stream_events(
    state: AppState,
    tenant: Option<Tenant>,
    headers: HeaderMap,
    query: HashMap<String, String>,
) -> Result<Response, ApiError> {
    let admin = tenant.is_none();
    let mut filter = filter(&query, admin)?;
    if let Some(tenant) = tenant {
        filter.tenant = Some(tenant.name().to_owned());
    }
    state.grace.check_open()?;
    let store = store(&state)?.clone();
    let last = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .filter(|n| *n >= 0)
                .ok_or_else(|| {
                    ApiError::bad_header("last-event-id", "must be the id of an event (an integer)")
                })
        })
        .transpose()?;
    let cursor = match last {
        Some(id) => store.event_cursor(id).await,
        None => store.events_now().await,
    }
    .map_err(store_error)?;
    let Some(open) = Open::take() else {
        return Err(ApiError::Unavailable {
            message: format!("{MAX_EVENT_STREAMS} job event streams are open (the most)"),
            retry_after: Some(Duration::from_secs(5)),
        });
    };
    let body = stream::unfold(
        Reader {
            store,
            state,
            filter,
            cursor,
            quiet: Duration::ZERO,
            _open: open,
        },
        |mut r| async move {
            let chunk = r.next().await?;
            Some((Ok::<_, std::io::Error>(chunk), r))
        },
    );
    let mut res = axum::body::Body::from_stream(body).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *res.status_mut() = StatusCode::OK;
    Ok(res)
}

/// One stream's reader: where it stands and what it wants.
struct Reader {
    store: sluice_jobs::AnyStore,
    state: AppState,
    filter: EventFilter,
    cursor: EventCursor,
    /// How long it has sent nothing.
    quiet: Duration,
    _open: Open,
}

impl Reader {
    /// The next chunk to send: events, or a keep-alive comment; `None`
    /// once the gateway drains.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if self.state.is_draining() {
                return None;
            }
            match self.store.events(self.cursor, &self.filter, PAGE).await {
                Ok(page) => {
                    self.cursor = page.cursor;
                    if !page.events.is_empty() {
                        self.quiet = Duration::ZERO;
                        let mut out = String::new();
                        for e in &page.events {
                            let data = serde_json::to_string(e).unwrap_or_else(|_| "null".into());
                            out.push_str(&format!(
                                "id: {}\nevent: {}\ndata: {data}\n\n",
                                e.id, e.event
                            ));
                        }
                        return Some(Bytes::from(out));
                    }
                    if page.full {
                        continue; // a page of others' events: read on at once
                    }
                    tokio::time::sleep(EVENTS_POLL).await;
                    self.quiet += EVENTS_POLL;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::error::chain(&e), "job events: reading the store");
                    tokio::time::sleep(AFTER_ERROR).await;
                    self.quiet += AFTER_ERROR;
                }
            }
            if self.quiet >= KEEP_ALIVE {
                self.quiet = Duration::ZERO;
                return Some(Bytes::from_static(b": keep-alive\n\n"));
            }
        }
    }
}
