//! The request log: `GET /v1/requests` (a tenant's own) and
//! `GET /v1/requests/all` (the operator: every tenant's, or one's with
//! `tenant=`), read from the usage ledger's per-request records, refused
//! and failed calls included, newest first, a page at a time:
//! `?from=&to=&key=&model=&kind=&status=&errors=true&request_id=&before=&limit=`.
//! The next page is `before=` the `next_before` of this one.
//! `GET /v1/requests/{id}` (and `/v1/requests/all/{id}`) is one request
//! with its redacted bodies, when `[request_log] bodies` kept them.

mod page;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_ledger::{Filter, Record};

use crate::error::{ApiError, chain};
use crate::layers::auth::{Admin, Tenant};
use crate::routes::usage::time;
use crate::state::AppState;

pub(crate) use page::{asset as page_asset, page};

/// The longest value a text filter takes.
const MAX_VALUE: usize = 256;

/// `GET /v1/requests`: the calling tenant's requests.
pub async fn own(
    State(state): State<AppState>,
    tenant: Tenant,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let mut filter = parse(raw.as_deref(), false)?;
    filter.tenant = Some(tenant.name().to_owned());
    answer(&state, &filter).await
}

/// `GET /v1/requests/all`: every tenant's requests (or one's, with
/// `tenant=`).
pub async fn all(
    State(state): State<AppState>,
    _: Admin,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    answer(&state, &parse(raw.as_deref(), true)?).await
}

/// `GET /v1/requests/{id}`: one of the calling tenant's requests, with
/// its bodies when they were kept.
pub async fn own_one(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    one(&state, &id, Some(tenant.name())).await
}

/// `GET /v1/requests/all/{id}`: any tenant's request, with its bodies.
pub async fn all_one(
    State(state): State<AppState>,
    _: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    one(&state, &id, None).await
}

async fn one(state: &AppState, id: &str, tenant: Option<&str>) -> Result<Response, ApiError> {
    let id = id
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::bad_field("id", "a request's `id` from the request log"))?;
    let ledger = ledger(state)?;
    let found = ledger.store.get(id, tenant).await.map_err(unreadable)?;
    // Another tenant's request is not found, as one that never was.
    let (id, record) = found.ok_or_else(|| ApiError::NotFound(format!("no request {id}")))?;
    let mut shown = row(id, &record);
    shown["bodies"] = match &record.bodies {
        Some(b) => json!({
            "request": b.request,
            "request_bytes": b.request_bytes,
            "request_truncated": !b.request_whole(),
            "response": b.response,
            "response_bytes": b.response_bytes,
            "response_truncated": !b.response_whole(),
        }),
        None => Value::Null,
    };
    Ok(Json(shown).into_response())
}

fn ledger(state: &AppState) -> Result<&crate::ledger::UsageLedger, ApiError> {
    state.observers.ledger.as_deref().ok_or_else(|| {
        ApiError::NotFound(
            "the request log is read from the usage ledger, which is off ([ledger] enabled = false)"
                .into(),
        )
    })
}

fn unreadable(e: sluice_ledger::Error) -> ApiError {
    ApiError::Unavailable {
        message: format!("the usage ledger cannot be read: {}", chain(&e)),
        retry_after: Some(std::time::Duration::from_secs(1)),
    }
}

async fn answer(state: &AppState, filter: &Filter) -> Result<Response, ApiError> {
    let found = ledger(state)?
        .store
        .find(filter)
        .await
        .map_err(unreadable)?;
    let full = found.len() >= filter.page() as usize;
    let next = found.last().filter(|_| full).map(|(id, _)| *id);
    let requests: Vec<Value> = found.iter().map(|(id, r)| row(*id, r)).collect();
    Ok(Json(json!({"requests": requests, "next_before": next})).into_response())
}

/// One request as the log shows it.
fn row(id: i64, r: &Record) -> Value {
    json!({
        "id": id,
        "at_ms": r.at_ms,
        "request_id": r.request_id,
        "tenant": r.tenant,
        "key_id": r.key_id,
        "user": r.user,
        "feature": r.feature,
        "kind": r.kind,
        "provider": r.provider,
        "model": r.model,
        "alias": r.alias,
        "deployment": r.deployment,
        "endpoint": r.endpoint,
        "status": r.status,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens,
        "reasoning_tokens": r.reasoning_tokens,
        "estimated": r.estimated,
        "cost_usd": r.cost_nanos as f64 / 1e9,
        "unpriced": r.unpriced,
        "latency_ms": r.latency_ms,
        "queue_ms": r.queue_ms,
        "retries": r.retries,
        "cache_hit": r.cache_hit,
    })
}

/// The filter `raw` asks for; `tenant=` only where `may_name_tenant`.
fn parse(raw: Option<&str>, may_name_tenant: bool) -> Result<Filter, ApiError> {
    let mut f = Filter::default();
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let text = |param: &str| -> Result<Option<String>, ApiError> {
            if value.len() > MAX_VALUE {
                return Err(ApiError::bad_field(
                    param,
                    format!("longer than {MAX_VALUE} bytes"),
                ));
            }
            Ok(Some(value.clone().into_owned()).filter(|v| !v.is_empty()))
        };
        match name.as_ref() {
            "from" => f.from_ms = Some(time("from", &value)?),
            "to" => f.to_ms = Some(time("to", &value)?),
            "key" => f.key_id = text("key")?,
            "model" => f.model = text("model")?,
            "kind" => f.kind = text("kind")?,
            "request_id" => f.request_id = text("request_id")?,
            "status" => {
                let s = value
                    .parse::<u16>()
                    .ok()
                    .filter(|s| (100..=599).contains(s))
                    .ok_or_else(|| ApiError::bad_field("status", "an HTTP status, 100 to 599"))?;
                f.status = Some(s);
            }
            "errors" => {
                f.errors = value
                    .parse()
                    .map_err(|_| ApiError::bad_field("errors", "true or false"))?;
            }
            "before" => {
                let id = value
                    .parse::<i64>()
                    .map_err(|_| ApiError::bad_field("before", "the `next_before` of a page"))?;
                f.before_id = Some(id);
            }
            "limit" => {
                f.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=sluice_ledger::MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "limit",
                            format!("a number from 1 to {}", sluice_ledger::MAX_PAGE),
                        )
                    })?;
            }
            "tenant" if may_name_tenant => f.tenant = text("tenant")?,
            "tenant" => {
                return Err(ApiError::bad_field(
                    "tenant",
                    "a tenant sees its own requests only: leave it out (the operator uses /v1/requests/all)",
                ));
            }
            other => {
                return Err(ApiError::bad_field(
                    other,
                    "unknown query parameter: use from, to, key, model, kind, status, errors, \
                     request_id, before, limit",
                ));
            }
        }
    }
    if let (Some(from), Some(to)) = (f.from_ms, f.to_ms)
        && from >= to
    {
        return Err(ApiError::bad_field("from", "must be before `to`"));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(raw: &str, admin: bool) -> String {
        match parse(Some(raw), admin) {
            Ok(f) => panic!("{raw}: {f:?}"),
            Err(ApiError::BadRequest { param, .. }) => param.unwrap_or_default(),
            Err(e) => panic!("{raw}: {e}"),
        }
    }

    #[test]
    fn a_filter_reads_and_bad_parameters_are_named() {
        let f = parse(
            Some("model=openai/gpt-4o&status=429&limit=5&before=99&from=2026-11-25T00:00:00Z"),
            false,
        )
        .unwrap();
        assert_eq!(f.model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!((f.status, f.limit, f.before_id), (Some(429), 5, Some(99)));
        assert!(f.from_ms.is_some());
        assert_eq!(bad("tenant=acme", false), "tenant");
        assert_eq!(
            parse(Some("tenant=acme"), true).unwrap().tenant.as_deref(),
            Some("acme")
        );
        assert_eq!(bad("status=99", true), "status");
        assert_eq!(bad("limit=0", true), "limit");
        assert_eq!(bad("limit=1001", true), "limit");
        assert_eq!(bad("nope=1", true), "nope");
        assert_eq!(bad(&format!("model={}", "m".repeat(300)), true), "model");
        assert_eq!(bad("from=2&to=1", true), "from");
    }
}
