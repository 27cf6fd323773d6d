//! Schedules: `POST /v1/schedules` stores one (replacing the caller's
//! schedule of that name), `GET /v1/schedules[/{name}]` reads the
//! caller's, `DELETE /v1/schedules/{name}` deletes one. A schedule is its
//! tenant's: another tenant's is as absent as a missing one. Every change
//! is audited. The gateways fire them (see `crate::jobs`).

use std::time::{Duration, SystemTime};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_jobs::Timestamp;
use sluice_jobs::schedule::{Cadence, NewSchedule, Schedule};

use super::spec::JobSpec;
use super::{store, store_error};
use crate::audit::Act;
use crate::body::ApiJson;
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::state::AppState;

/// How far ahead `start_at` and `end_at` may be.
const MAX_AHEAD: Duration = Duration::from_secs(10 * 365 * 86_400);

/// The body of `POST /v1/schedules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScheduleSpec {
    name: Option<String>,
    /// Signed so that a negative number is refused with the range.
    every_ms: Option<i64>,
    cron: Option<String>,
    tz: Option<String>,
    job: Option<JobSpec>,
    start_at: Option<i64>,
    end_at: Option<i64>,
    limit: Option<i64>,
}

/// A schedule as the API shows it.
pub(crate) fn schedule_json(s: &Schedule) -> Value {
    serde_json::to_value(s).unwrap_or_else(|e| json!({"error": e.to_string()}))
}

fn instant(field: &str, ms: i64) -> Result<Timestamp, ApiError> {
    let now = Timestamp::from(SystemTime::now());
    if ms < 0 {
        return Err(ApiError::bad_field(
            field,
            format!("must be milliseconds since the Unix epoch, not {ms}"),
        ));
    }
    let at = Timestamp::from_millis(ms);
    if at > now + MAX_AHEAD {
        return Err(ApiError::bad_field(
            field,
            "is more than 10 years ahead (milliseconds since the Unix epoch)",
        ));
    }
    Ok(at)
}

impl ScheduleSpec {
    fn into_schedule(self, state: &AppState, tenant: &str) -> Result<NewSchedule, ApiError> {
        let name = self
            .name
            .ok_or_else(|| ApiError::bad_field("name", "is required"))?;
        check_name(&name)?;
        let cadence = match (self.every_ms, self.cron) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_field(
                    "every_ms",
                    "give either `every_ms` or `cron`, not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::bad_field(
                    "every_ms",
                    "is required (or `cron` with `tz`)",
                ));
            }
            (Some(ms), None) => {
                if self.tz.is_some() {
                    return Err(ApiError::bad_field("tz", "applies to `cron` only"));
                }
                let ms = u64::try_from(ms).unwrap_or(0);
                Cadence::every(Duration::from_millis(ms))
            }
            (None, Some(expr)) => Cadence::cron(&expr, self.tz.as_deref().unwrap_or("UTC")),
        }
        .map_err(|e| ApiError::bad_field(e.field, e.reason))?;
        let spec = self
            .job
            .ok_or_else(|| ApiError::bad_field("job", "is required"))?;
        if let Some(field) = spec.timing_field() {
            return Err(ApiError::bad_field(
                &format!("job.{field}"),
                "is set by each tick of a schedule, not by its job",
            ));
        }
        let job = spec.into_job(state, tenant, "job.")?;
        let mut s = NewSchedule::new(tenant, name, cadence, job);
        if let Some(ms) = self.start_at {
            s = s.start_at(instant("start_at", ms)?);
        }
        if let Some(ms) = self.end_at {
            s = s.end_at(instant("end_at", ms)?);
        }
        if let Some(n) = self.limit {
            if n < 1 {
                return Err(ApiError::bad_field(
                    "limit",
                    format!("must be at least 1, not {n}"),
                ));
            }
            s = s.limit(n as u64);
        }
        s.validate().map_err(|e| match e {
            sluice_jobs::Error::Invalid { field, reason } => ApiError::bad_field(field, reason),
            other => ApiError::Internal(other.to_string()),
        })?;
        Ok(s)
    }
}

/// A schedule's name: 1 to 200 bytes of letters, digits and `-_.:`, so
/// that it sits in a URL path as it is.
fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= sluice_jobs::MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_field(
            "name",
            "must be 1 to 200 letters, digits, `-`, `_`, `.` or `:`",
        ))
    }
}

/// `POST /v1/schedules`: 201 with a new schedule, 200 with one that
/// replaced the caller's schedule of the same name.
pub(crate) async fn put(
    State(state): State<AppState>,
    tenant: Tenant,
    act: Act,
    ApiJson(spec): ApiJson<ScheduleSpec>,
) -> Result<(Act, Response), ApiError> {
    state.grace.check_open()?;
    let store = store(&state)?;
    let new = spec.into_schedule(&state, tenant.name())?;
    let (stored, replaced) = store.put_schedule(new).await.map_err(store_error)?;
    let body = schedule_json(&stored);
    state.observers.record(
        act.entry(&tenant.actor(), "schedule.put", &stored.name)
            .after(body.clone()),
    );
    let status = if replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((act, (status, axum::Json(body)).into_response()))
}

/// `GET /v1/schedules`: the caller's schedules, by name.
pub(crate) async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    let all = store
        .schedules(Some(tenant.name()))
        .await
        .map_err(store_error)?;
    let schedules: Vec<Value> = all.iter().map(schedule_json).collect();
    Ok(axum::Json(json!({"schedules": schedules})).into_response())
}

/// `GET /v1/schedules/{name}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    check_name(&name)?;
    match store
        .schedule(tenant.name(), &name)
        .await
        .map_err(store_error)?
    {
        Some(s) => Ok(axum::Json(schedule_json(&s)).into_response()),
        None => Err(not_found(&name)),
    }
}

/// `DELETE /v1/schedules/{name}`: it fires no more; the jobs it enqueued
/// stay. 404 for a name the caller has no schedule of.
pub(crate) async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    act: Act,
    Path(name): Path<String>,
) -> Result<(Act, Response), ApiError> {
    let store = store(&state)?;
    check_name(&name)?;
    let Some(was) = store
        .schedule(tenant.name(), &name)
        .await
        .map_err(store_error)?
    else {
        return Err(not_found(&name));
    };
    if !store
        .delete_schedule(tenant.name(), &name)
        .await
        .map_err(store_error)?
    {
        return Err(not_found(&name));
    }
    state.observers.record(
        act.entry(&tenant.actor(), "schedule.delete", &name)
            .before(schedule_json(&was)),
    );
    Ok((
        act,
        axum::Json(json!({"name": name, "deleted": true})).into_response(),
    ))
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!("schedule {name:?} not found"))
}
