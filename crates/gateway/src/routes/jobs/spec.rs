//! A job as the API takes it, checked field by field into a [`NewJob`];
//! every error names the field as the client wrote it (`jobs[3].payload.guild_id`).

use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::Value;
use sluice_jobs::{DEFAULT_GROUP, NewJob, Timestamp};

use crate::config::validate_jobs::MAX_ATTEMPTS;
use crate::credentials;
use crate::error::ApiError;
use crate::state::AppState;

/// How far ahead `run_at` may be.
const MAX_DELAY: Duration = Duration::from_secs(365 * 86_400);

/// The body of `POST /v1/jobs`, and one entry of a batch. Required fields
/// are options so that a missing one is named like any other bad field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobSpec {
    queue: Option<String>,
    kind: Option<String>,
    payload: Option<Value>,
    priority: Option<i32>,
    group: Option<String>,
    /// Milliseconds since the Unix epoch.
    run_at: Option<i64>,
    /// Signed so that `-1` is refused by the range check, which says what
    /// is allowed, rather than by serde.
    max_attempts: Option<i64>,
    idempotency_key: Option<String>,
    /// Taken by `POST /v1/jobs` only, before [`JobSpec::into_job`].
    callback_url: Option<String>,
}

/// The body of `POST /v1/jobs/batch`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Batch {
    pub(super) jobs: Option<Vec<JobSpec>>,
}

impl JobSpec {
    /// The field of the body that a schedule's job may not set (each
    /// tick sets it), if one is set.
    pub(super) fn timing_field(&self) -> Option<&'static str> {
        if self.run_at.is_some() {
            Some("run_at")
        } else if self.idempotency_key.is_some() {
            Some("idempotency_key")
        } else {
            None
        }
    }

    /// Takes the `callback_url` out (`POST /v1/jobs` stores it as a
    /// callback job); anywhere else [`JobSpec::into_job`] refuses it.
    pub(super) fn take_callback(&mut self) -> Option<String> {
        self.callback_url.take()
    }

    /// The idempotency key in the body, if any.
    pub(super) fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    /// The job to store for `tenant`; `at` prefixes field names (`""` or
    /// `jobs[3].`).
    pub(super) fn into_job(
        self,
        state: &AppState,
        tenant: &str,
        at: &str,
    ) -> Result<NewJob, ApiError> {
        let field = |name: &str| format!("{at}{name}");
        let bad = |name: &str, message: String| ApiError::bad_field(&field(name), message);
        if self.callback_url.is_some() {
            return Err(bad(
                "callback_url",
                "is taken by POST /v1/jobs only (not in a batch, a flow or a schedule)".into(),
            ));
        }
        let queue = self
            .queue
            .ok_or_else(|| bad("queue", "is required".into()))?;
        let Some(settings) = state.config.jobs.queues.get(&queue) else {
            let known: Vec<&str> = state
                .config
                .jobs
                .queues
                .keys()
                .map(String::as_str)
                .collect();
            return Err(bad(
                "queue",
                format!(
                    "unknown queue {queue:?}: the configured queues are {} ([jobs.queues.<name>])",
                    known.join(", ")
                ),
            ));
        };
        let kind = self.kind.ok_or_else(|| bad("kind", "is required".into()))?;
        // The standard kinds, or one the embedder registered.
        let standard = sluice_jobs_http::KINDS.contains(&kind.as_str());
        let own = state
            .stores
            .jobs
            .as_ref()
            .and_then(|j| j.kinds().get(&kind));
        if !standard && own.is_none() {
            let mut kinds = sluice_jobs_http::KINDS.to_vec();
            kinds.extend(state.stores.jobs.iter().flat_map(|j| j.kinds().names()));
            return Err(bad(
                "kind",
                format!("unknown kind {kind:?}: one of {}", kinds.join(", ")),
            ));
        }
        let payload = self
            .payload
            .ok_or_else(|| bad("payload", "is required".into()))?;
        // The error names the field from `payload` down: `payload.guild_id`.
        match own {
            Some(own) => own.check(&payload),
            None => sluice_jobs_http::validate_payload(&kind, &payload),
        }
        .map_err(|p| bad(&p.field, p.message))?;
        // An `http` job calls a configured API by name, never a URL of its
        // own; a name the gateway does not know would only fail later.
        if kind == sluice_jobs_http::HTTP_KIND
            && let Some(api) = payload.get("api").and_then(Value::as_str)
            && state.config.api(api).is_none()
        {
            let known: Vec<&str> = state.config.apis.iter().map(|a| a.name.as_str()).collect();
            return Err(bad(
                "payload.api",
                format!("unknown API {api:?}: one of {}", known.join(", ")),
            ));
        }
        // A job the tenant may not run (no credential of its own for the
        // API, and the shared one not shared) is refused now, not left to
        // die in the queue; the worker checks again when it runs.
        let api = match kind.as_str() {
            sluice_jobs_http::HTTP_KIND => payload
                .get("api")
                .and_then(Value::as_str)
                .map(|api| ("payload.api", api)),
            _ if standard => Some(("kind", "discord")),
            // The embedder's kinds call what they call, with their own
            // credentials: none of the gateway's is lent to them.
            _ => None,
        };
        if let Some((name, api)) = api {
            credentials::value_for(state.upstreams.credentials.api(api), tenant, "API", api)
                .map_err(|e| ApiError::NoCredential(format!("`{}`: {e}", field(name))))?;
        }
        let max_attempts = match self.max_attempts {
            None => settings.max_attempts,
            Some(n) if (1..=i64::from(MAX_ATTEMPTS)).contains(&n) => n as u32,
            Some(n) => {
                return Err(bad(
                    "max_attempts",
                    format!("must be between 1 and {MAX_ATTEMPTS}, not {n}"),
                ));
            }
        };
        let mut job = NewJob::new(queue, kind, payload)
            .tenant(tenant)
            .group(self.group.unwrap_or_else(|| DEFAULT_GROUP.to_owned()))
            .priority(self.priority.unwrap_or(0))
            .max_attempts(max_attempts);
        if let Some(key) = self.idempotency_key {
            job = job.idempotency_key(key);
        }
        if let Some(ms) = self.run_at {
            let now = Timestamp::from(SystemTime::now());
            if ms < 0 {
                return Err(bad(
                    "run_at",
                    format!("must be milliseconds since the Unix epoch, not {ms}"),
                ));
            }
            let at = Timestamp::from_millis(ms);
            if at > now + MAX_DELAY {
                return Err(bad(
                    "run_at",
                    "is more than 365 days ahead (run_at is in milliseconds since the Unix epoch)"
                        .into(),
                ));
            }
            job = job.run_at(at);
        }
        job.validate().map_err(|e| match e {
            sluice_jobs::Error::Invalid {
                field: "tenant",
                reason,
            } => ApiError::bad_header("x-sluice-workspace", reason),
            sluice_jobs::Error::Invalid { field, reason } => bad(field, reason.into()),
            other => ApiError::Internal(other.to_string()),
        })?;
        Ok(job)
    }
}
