//! `/_sim/…`: read the counters and the log, change faults and limits,
//! reset. Not rate limited, not logged, no API key.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::config::{Faults, Limits};
use crate::state::{Scope, Shared};

/// `POST /_sim/faults`: `{"model": "gpt-4o"} | {"api": "slack"} | {}` (all)
/// plus `"faults": {…}` replacing the target's faults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetFaults {
    model: Option<String>,
    api: Option<String>,
    faults: Faults,
}

/// `POST /_sim/limits`: `{"model": …} | {"api": …}` plus `"limits": {…}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetLimits {
    model: Option<String>,
    api: Option<String>,
    limits: Limits,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogQuery {
    since: Option<u64>,
}

pub(crate) async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.stats()).into_response()
}

pub(crate) async fn log(State(shared): State<Arc<Shared>>, Query(q): Query<LogQuery>) -> Response {
    Json(shared.log_page(q.since.unwrap_or(0))).into_response()
}

pub(crate) async fn reset(State(shared): State<Arc<Shared>>) -> Response {
    shared.reset();
    ok()
}

pub(crate) async fn faults(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let applied = read::<SetFaults>(&body).and_then(|set| {
        let scope = Scope::from_fields(set.model, set.api)?;
        shared.set_faults(&scope, set.faults)
    });
    answer(applied)
}

pub(crate) async fn limits(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let applied = read::<SetLimits>(&body).and_then(|set| {
        let scope = Scope::from_fields(set.model, set.api)?;
        shared.set_limits(&scope, set.limits)
    });
    answer(applied)
}

fn read<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::invalid("body", e.to_string()))
}

fn answer(applied: Result<(), Error>) -> Response {
    match applied {
        Ok(()) => ok(),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"ok": false, "error": e.to_string()})),
        )
            .into_response(),
    }
}

fn ok() -> Response {
    Json(json!({"ok": true})).into_response()
}
