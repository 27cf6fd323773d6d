//! `GET /v1/usage` (a tenant's own spend) and `GET /v1/usage/all` (the
//! operator: every tenant's), read from the usage ledger's rollups:
//! `?group_by=tenant,key,model,feature&from=&to=&granularity=`.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sluice_ledger::{Dim, Granularity, Query};

use crate::error::{ApiError, chain};
use crate::layers::auth::{Admin, Tenant};
use crate::state::AppState;

/// The range read when `from` is not given: the day before `to`.
const DEFAULT_RANGE_MS: i64 = 86_400_000;

/// `GET /v1/usage`: the calling tenant's usage.
pub async fn own(
    State(state): State<AppState>,
    tenant: Tenant,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    answer(&state, raw.as_deref(), Some(tenant.name())).await
}

/// `GET /v1/usage/all`: every tenant's usage (or one's, with `tenant=`).
pub async fn all(
    State(state): State<AppState>,
    _: Admin,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    answer(&state, raw.as_deref(), None).await
}

async fn answer(
    state: &AppState,
    raw: Option<&str>,
    tenant: Option<&str>,
) -> Result<Response, ApiError> {
    let Some(ledger) = state.observers.ledger.as_ref() else {
        return Err(ApiError::NotFound(
            "the usage ledger is off ([ledger] enabled = false)".into(),
        ));
    };
    let mut q = parse(raw, tenant.is_none())?;
    if let Some(t) = tenant {
        q.tenant = Some(t.to_owned());
    }
    let rows = ledger
        .store
        .usage(&q)
        .await
        .map_err(|e| ApiError::Unavailable {
            message: format!("the usage ledger cannot be read: {}", chain(&e)),
            retry_after: Some(std::time::Duration::from_secs(1)),
        })?;
    let group_by: Vec<&str> = q.group_by.iter().map(|d| d.as_str()).collect();
    Ok(Json(json!({
        "from_ms": q.from_ms,
        "to_ms": q.to_ms,
        "granularity": q.granularity,
        "group_by": group_by,
        "tenant": q.tenant,
        "truncated": rows.len() >= q.limit,
        "rows": rows,
    }))
    .into_response())
}

/// The query `raw` asks for; `tenant=` only where `may_name_tenant`.
fn parse(raw: Option<&str>, may_name_tenant: bool) -> Result<Query, ApiError> {
    let now = sluice_ledger::now_ms();
    let (mut from, mut to, mut granularity) = (None, None, Granularity::Day);
    let mut q = Query::new(0, 0, granularity);
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        match name.as_ref() {
            "from" => from = Some(time("from", &value)?),
            "to" => to = Some(time("to", &value)?),
            "granularity" => {
                granularity = value
                    .parse()
                    .map_err(|e| ApiError::bad_field("granularity", e))?;
            }
            "group_by" => {
                let dims = value
                    .split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|d| d.parse::<Dim>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| ApiError::bad_field("group_by", e))?;
                q = q.group_by(dims);
            }
            "tenant" if may_name_tenant => {
                q.tenant = Some(value.into_owned()).filter(|t| !t.is_empty());
            }
            "tenant" => {
                return Err(ApiError::bad_field(
                    "tenant",
                    "a tenant sees its own usage only: leave it out (the operator uses /v1/usage/all)",
                ));
            }
            other => {
                return Err(ApiError::bad_field(
                    other,
                    "unknown query parameter: use from, to, granularity, group_by",
                ));
            }
        }
    }
    q.to_ms = to.unwrap_or(now);
    q.from_ms = from.unwrap_or(q.to_ms.saturating_sub(DEFAULT_RANGE_MS));
    if q.from_ms >= q.to_ms {
        return Err(ApiError::bad_field("from", "must be before `to`"));
    }
    q.granularity = granularity;
    Ok(q)
}

/// A time: milliseconds since the Unix epoch, or RFC 3339.
pub(crate) fn time(param: &str, value: &str) -> Result<i64, ApiError> {
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    value
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| {
            ApiError::bad_field(
                param,
                format!(
                    "{value:?} is not a time: milliseconds since the Unix epoch or RFC 3339 (2026-11-26T00:00:00Z)"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(raw: &str) -> String {
        match parse(Some(raw), false) {
            Ok(q) => panic!("{raw}: {q:?}"),
            Err(ApiError::BadRequest { param, .. }) => param.unwrap_or_default(),
            Err(e) => panic!("{raw}: {e}"),
        }
    }

    #[test]
    fn a_query_reads_and_bad_parameters_are_named() {
        let q = parse(
            Some(
                "group_by=model,tenant&from=2026-11-25T00:00:00Z&to=1795651200000&granularity=hour",
            ),
            true,
        )
        .unwrap();
        assert_eq!(q.group_by, [Dim::Tenant, Dim::Model]);
        assert_eq!((q.from_ms, q.to_ms), (1_795_564_800_000, 1_795_651_200_000));
        assert_eq!(q.granularity, Granularity::Hour);
        let d = parse(None, false).unwrap();
        assert_eq!(d.to_ms - d.from_ms, DEFAULT_RANGE_MS);
        assert_eq!(d.granularity, Granularity::Day);
        assert_eq!(bad("granularity=week"), "granularity");
        assert_eq!(bad("group_by=user"), "group_by");
        assert_eq!(bad("from=yesterday"), "from");
        assert_eq!(bad("from=10&to=5"), "from");
        assert_eq!(bad("tenant=globex"), "tenant");
        assert_eq!(bad("limit=5"), "limit");
    }
}
