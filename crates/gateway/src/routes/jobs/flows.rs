//! `POST /v1/flows`: a parent job that runs once its children are done,
//! stored in one transaction (see `sluice_jobs::flow`). A child is a job,
//! or a flow of its own (an object with `parent`). Every job is checked
//! as `POST /v1/jobs` checks it, errors naming the field from the top
//! (`children[1].parent.payload.guild_id`).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_jobs::flow::{ChildFailure, MAX_FLOW_DEPTH, MAX_FLOW_JOBS, NewFlow};

use super::spec::JobSpec;
use super::{OpenStore, job_json, notify, store_error};
use crate::body::{Body, json as parse};
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::state::AppState;

/// Reads the flow at `at` (`""`, `children[2].`) of `value`, `depth` deep.
fn flow(
    state: &AppState,
    tenant: &str,
    value: Value,
    at: &str,
    depth: usize,
    size: &mut usize,
) -> Result<NewFlow, ApiError> {
    let field = |name: &str| format!("{at}{name}");
    if depth > MAX_FLOW_DEPTH {
        return Err(ApiError::bad_field(
            &field("children"),
            format!("flows nest at most {MAX_FLOW_DEPTH} deep"),
        ));
    }
    let Value::Object(mut object) = value else {
        return Err(ApiError::bad_field(
            at.trim_end_matches('.'),
            "must be an object",
        ));
    };
    let parent = object
        .remove("parent")
        .ok_or_else(|| ApiError::bad_field(&field("parent"), "is required"))?;
    let children = object
        .remove("children")
        .ok_or_else(|| ApiError::bad_field(&field("children"), "is required"))?;
    let policy = match object.remove("on_child_failure") {
        None => ChildFailure::Fail,
        Some(Value::String(s)) if s == "fail" => ChildFailure::Fail,
        Some(Value::String(s)) if s == "ignore" => ChildFailure::Ignore,
        Some(_) => {
            return Err(ApiError::bad_field(
                &field("on_child_failure"),
                "must be \"fail\" or \"ignore\"",
            ));
        }
    };
    if let Some(unknown) = object.keys().next() {
        return Err(ApiError::bad_field(
            &field(unknown),
            "unknown field: parent, children, on_child_failure",
        ));
    }
    let parent_at = field("parent.");
    let parent = job(state, tenant, parent, &parent_at, size)?;
    if parent.run_at.is_some() {
        return Err(ApiError::bad_field(
            &field("parent.run_at"),
            "a flow's parent runs once its children are done",
        ));
    }
    let Value::Array(children) = children else {
        return Err(ApiError::bad_field(&field("children"), "must be an array"));
    };
    if children.is_empty() {
        return Err(ApiError::bad_field(
            &field("children"),
            "must hold at least one job",
        ));
    }
    let mut out = NewFlow::new(parent).on_child_failure(policy);
    for (i, child) in children.into_iter().enumerate() {
        let child_at = format!("{at}children[{i}].");
        if child.get("parent").is_some() {
            out = out.child_flow(flow(state, tenant, child, &child_at, depth + 1, size)?);
        } else {
            let job = job(state, tenant, child, &child_at, size)?;
            if job.idempotency_key.is_some() || job.run_at.is_some() {
                return Err(ApiError::bad_field(
                    &format!("{child_at}idempotency_key"),
                    "a flow's children take no idempotency key or run_at",
                ));
            }
            out = out.child(job);
        }
    }
    Ok(out)
}

/// One job of a flow, checked as `POST /v1/jobs` checks it.
fn job(
    state: &AppState,
    tenant: &str,
    value: Value,
    at: &str,
    size: &mut usize,
) -> Result<sluice_jobs::NewJob, ApiError> {
    *size += 1;
    if *size > MAX_FLOW_JOBS {
        return Err(ApiError::bad_field(
            "children",
            format!("a flow holds at most {MAX_FLOW_JOBS} jobs"),
        ));
    }
    let spec: JobSpec = serde_json::from_value(value)
        .map_err(|e| ApiError::bad_field(at.trim_end_matches('.'), e))?;
    spec.into_job(state, tenant, at)
}

/// `POST /v1/flows`: 201 with `{"parent", "jobs"}` (the parent first, in
/// the order given); with a known `Idempotency-Key`, 200 with the flow's
/// parent alone.
pub(crate) async fn enqueue_flow(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    store: OpenStore,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let value: Value = parse(&body)?;
    let mut size = 0;
    let mut new = flow(&state, tenant.name(), value, "", 1, &mut size)?;
    if let Some(key) = headers.get("idempotency-key") {
        let key = key
            .to_str()
            .map_err(|_| ApiError::bad_header("idempotency-key", "not visible ASCII"))?
            .trim();
        if !key.is_empty() {
            new.parent = new.parent.idempotency_key(key);
        }
    }
    new.validate().map_err(|e| match e {
        sluice_jobs::Error::Invalid { field, reason } => ApiError::bad_field(field, reason),
        other => ApiError::Internal(other.to_string()),
    })?;
    let jobs = store.enqueue_flow(new).await.map_err(store_error)?;
    let replay = jobs.len() == 1;
    let mut queues: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        notify(&state, queue);
    }
    let parent = jobs.first().map(job_json).unwrap_or(Value::Null);
    let all: Vec<Value> = jobs.iter().map(job_json).collect();
    let status = if replay {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, axum::Json(json!({"parent": parent, "jobs": all}))).into_response())
}
