//! What a request says about itself in its headers: who (tenant), how
//! urgent (priority), which conversation (thread), which request (id), and
//! how long it may take (deadline).

use std::time::Duration;

use axum::http::HeaderMap;
use sluice_admit::Priority;
use tokio::time::Instant;

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::state::AppState;

pub use crate::auth::DEFAULT_WORKSPACE;

/// A request's context.
#[derive(Debug, Clone)]
pub struct Context {
    /// The tenant (workspace).
    pub workspace: String,
    /// `x-sluice-priority`, default normal.
    pub priority: Priority,
    /// `x-sluice-thread`: the session, for the per-session limit and traces.
    pub thread: Option<String>,
    /// `x-request-id` or `Idempotency-Key`; made up when absent.
    pub request_id: String,
    /// Whether the id came from the client (and so deduplicates).
    pub client_id: bool,
    /// When the request must be answered by.
    pub deadline: Instant,
    /// When it arrived.
    pub started: Instant,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| ApiError::bad_header(name, "not visible ASCII")),
    }
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
        let priority = match header(headers, "x-sluice-priority")? {
            None | Some("") => Priority::Normal,
            Some(p) => p
                .parse()
                .map_err(|e| ApiError::bad_header("x-sluice-priority", e))?,
        };
        let thread = header(headers, "x-sluice-thread")?
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if thread.as_ref().is_some_and(|t| t.len() > MAX_ID) {
            return Err(ApiError::bad_header(
                "x-sluice-thread",
                format!("longer than {MAX_ID}"),
            ));
        }
        let id = match header(headers, "x-request-id")? {
            Some(id) if !id.is_empty() => Some(("x-request-id", id)),
            _ => header(headers, "idempotency-key")?
                .filter(|k| !k.is_empty())
                .map(|k| ("idempotency-key", k)),
        };
        if let Some((name, id)) = id
            && id.len() > MAX_ID
        {
            return Err(ApiError::bad_header(name, format!("longer than {MAX_ID}")));
        }
        let cfg = &state.config;
        let timeout_ms = match header(headers, "x-sluice-timeout-ms")? {
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
        Ok(Context {
            workspace,
            priority,
            thread,
            client_id: id.is_some(),
            request_id: id.map_or_else(new_id, |(_, id)| id.to_owned()),
            deadline: started + Duration::from_millis(timeout_ms),
            started,
        })
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A random request id.
pub fn new_id() -> String {
    format!("req_{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..))
}
