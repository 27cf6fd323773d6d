//! Every error the gateway answers with, mapped to HTTP in one place:
//! OpenAI-style JSON bodies, and `Retry-After` where waiting helps; and
//! why it could not start ([`StartError`]), its causes chained.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed; the message names the field or header.
    #[error("{message}")]
    BadRequest {
        /// What is wrong, naming the field.
        message: String,
        /// The OpenAI-style `param`, when one field is to blame.
        param: Option<String>,
    },
    /// No or an unknown tenant key.
    #[error("{0}")]
    Unauthorized(String),
    /// An admin call without the admin token.
    #[error("{0}")]
    Forbidden(String),
    /// The tenant may use no credential for the upstream: it has none of
    /// its own, and the shared one is not shared (or there is none).
    #[error("{0}")]
    NoCredential(String),
    /// The upstream takes a key and the gateway has none for it (503
    /// `provider_not_configured`): the operator's to fix, not the caller's.
    #[error("{0}")]
    NotConfigured(String),
    /// No such route, API or grant.
    #[error("{0}")]
    NotFound(String),
    /// The target's state does not allow the operation (retrying a job
    /// that is not dead, cancelling a finished one).
    #[error("{0}")]
    Conflict(String),
    /// A known route called with a method it does not serve.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The body is larger than the configured cap.
    #[error("request body is larger than {limit} bytes (max_body_bytes)")]
    PayloadTooLarge {
        /// The cap.
        limit: usize,
    },
    /// The client did not send its whole body in time.
    #[error("the request body did not arrive within {} ms (http.body_read_timeout_ms)", .0.as_millis())]
    BodyTimeout(Duration),
    /// The limiter refused: waiting helps.
    #[error("rate limited on {resource}")]
    RateLimited {
        /// The resource.
        resource: String,
        /// How long to wait.
        retry_after: Option<Duration>,
        /// Capacity per window and the window, for `RateLimit-Policy`.
        policy: Option<(u64, Duration)>,
    },
    /// A budget of the caller's key or tenant has no room for the call
    /// until it resets.
    #[error("{message}")]
    BudgetExceeded {
        /// Which budget, what is spent and when it resets.
        message: String,
        /// Until the reset.
        retry_after: Duration,
    },
    /// The admission queue is full.
    #[error("queue full ({scope}): try again later")]
    QueueFull {
        /// `tenant` or `total`.
        scope: &'static str,
        /// How long to wait.
        retry_after: Option<Duration>,
    },
    /// A request that can never be served under the configured limits.
    #[error("{0}")]
    TooLarge(String),
    /// The upstream failed (connect errors, 5xx after retries).
    #[error("upstream error: {0}")]
    BadGateway(String),
    /// Shutting down, a pool is full, or a deduplicated leader went away.
    #[error("{message}")]
    Unavailable {
        /// Why.
        message: String,
        /// When to come back.
        retry_after: Option<Duration>,
    },
    /// The request's deadline passed.
    #[error("deadline passed: {0}")]
    Timeout(String),
    /// A bug or an I/O failure of the gateway itself.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 naming `field`.
    pub fn bad_field(field: &str, message: impl std::fmt::Display) -> Self {
        ApiError::BadRequest {
            message: format!("`{field}`: {message}"),
            param: Some(field.to_owned()),
        }
    }

    /// A 400 naming a header.
    pub fn bad_header(header: &str, message: impl std::fmt::Display) -> Self {
        ApiError::BadRequest {
            message: format!("header `{header}`: {message}"),
            param: Some(header.to_owned()),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } | ApiError::TooLarge(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::NoCredential(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::RateLimited { .. }
            | ApiError::QueueFull { .. }
            | ApiError::BudgetExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Unavailable { .. } | ApiError::NotConfigured(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI-style `(type, code)`.
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            ApiError::BadRequest { .. } => ("invalid_request_error", "invalid_request"),
            ApiError::TooLarge(_) => ("invalid_request_error", "cost_exceeds_capacity"),
            ApiError::Unauthorized(_) => ("authentication_error", "invalid_api_key"),
            ApiError::Forbidden(_) => ("permission_error", "forbidden"),
            ApiError::NoCredential(_) => ("permission_error", "no_credential"),
            ApiError::NotConfigured(_) => ("service_unavailable", "provider_not_configured"),
            ApiError::NotFound(_) => ("invalid_request_error", "not_found"),
            ApiError::Conflict(_) => ("invalid_request_error", "conflict"),
            ApiError::MethodNotAllowed(_) => ("invalid_request_error", "method_not_allowed"),
            ApiError::PayloadTooLarge { .. } => ("invalid_request_error", "payload_too_large"),
            ApiError::BodyTimeout(_) => ("invalid_request_error", "body_timeout"),
            ApiError::RateLimited { .. } => ("rate_limit_error", "rate_limited"),
            ApiError::QueueFull { .. } => ("rate_limit_error", "queue_full"),
            // OpenAI's own type for a spent quota, so SDKs show it as such.
            ApiError::BudgetExceeded { .. } => ("insufficient_quota", "budget_exceeded"),
            ApiError::BadGateway(_) => ("upstream_error", "bad_gateway"),
            ApiError::Unavailable { .. } => ("service_unavailable", "unavailable"),
            ApiError::Timeout(_) => ("timeout_error", "deadline_exceeded"),
            ApiError::Internal(_) => ("server_error", "internal_error"),
        }
    }

    /// How long the client should wait, where waiting helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::RateLimited { retry_after, .. }
            | ApiError::QueueFull { retry_after, .. }
            | ApiError::Unavailable { retry_after, .. } => *retry_after,
            ApiError::BudgetExceeded { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The error as the JSON body clients parse.
    pub fn body(&self) -> serde_json::Value {
        let (kind, code) = self.kind();
        let param = match self {
            ApiError::BadRequest { param, .. } => param.clone(),
            _ => None,
        };
        serde_json::json!({
            "error": {"message": self.to_string(), "type": kind, "code": code, "param": param}
        })
    }
}

/// An error and its causes, `: `-separated (many errors' own message
/// says only what failed, their source why).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Whole seconds, rounded up, at least 1: what `Retry-After` carries.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status(), axum::Json(self.body())).into_response();
        let headers = res.headers_mut();
        if let Some(wait) = self.retry_after() {
            let secs = retry_after_secs(wait).max(1);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            headers.insert("retry-after-ms", HeaderValue::from(wait.as_millis() as u64));
            if let ApiError::RateLimited {
                policy: Some((limit, window)),
                ..
            } = &self
            {
                // IETF draft fields: the policy, and that nothing is left.
                let policy = format!("{limit};w={}", window.as_secs().max(1));
                if let Ok(v) = HeaderValue::from_str(&policy) {
                    headers.insert("ratelimit-policy", v);
                }
                let now = format!("limit={limit}, remaining=0, reset={secs}");
                if let Ok(v) = HeaderValue::from_str(&now) {
                    headers.insert("ratelimit", v);
                }
            }
        }
        res
    }
}

impl From<sluice_admit::Error> for ApiError {
    fn from(e: sluice_admit::Error) -> Self {
        use sluice_admit::{Error as E, Scope};
        match e {
            E::QueueFull { scope, retry_after } => ApiError::QueueFull {
                scope: match scope {
                    Scope::Tenant => "tenant",
                    Scope::Total => "total",
                },
                retry_after: Some(retry_after),
            },
            // Every slot of the lane is held and the caller will not wait.
            E::WouldWait { retry_after } => ApiError::QueueFull {
                scope: "lane",
                retry_after: Some(retry_after),
            },
            E::DeadlineExceeded => ApiError::Timeout("while queued".into()),
            E::BulkheadFull { pool } => ApiError::Unavailable {
                message: format!("the {pool} pool is full"),
                retry_after: Some(Duration::from_secs(1)),
            },
            E::LeaderCancelled => ApiError::Unavailable {
                message: "an identical request (same id) was cancelled; send it again".into(),
                retry_after: Some(Duration::from_secs(1)),
            },
            E::Closed => ApiError::Unavailable {
                message: "shutting down".into(),
                retry_after: Some(Duration::from_secs(1)),
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl ApiError {
    /// A limiter error on `resource`, with its policy for the headers.
    pub fn from_limit(e: sluice_limit::Error, policy: Option<(u64, Duration)>) -> Self {
        use sluice_limit::Error as E;
        match e {
            E::RateLimited {
                resource,
                retry_after,
            } => ApiError::RateLimited {
                resource,
                retry_after: retry_after.or(Some(Duration::from_secs(1))),
                policy,
            },
            E::DeadlinePassed { resource, wait } => ApiError::RateLimited {
                resource,
                retry_after: wait.or(Some(Duration::from_secs(1))),
                policy,
            },
            E::InsufficientCapacity { .. } => ApiError::TooLarge(e.to_string()),
            E::Closed => ApiError::Unavailable {
                message: "shutting down".into(),
                retry_after: Some(Duration::from_secs(1)),
            },
            E::UnknownResource(_) | E::UnknownGrant(_) => ApiError::NotFound(e.to_string()),
            other => ApiError::BadRequest {
                message: other.to_string(),
                param: None,
            },
        }
    }
}

impl From<crate::stores::Refused> for StartError {
    fn from(refused: crate::stores::Refused) -> StartError {
        StartError::Store(refused)
    }
}

/// A cause of a [`StartError`] that is not an error type of its own (a
/// message) or is one of many kinds.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why the gateway could not start. Its cause, where it has one, is its
/// [`source`](std::error::Error::source): [`chain`] shows both.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A limit in the config is unusable.
    #[error("invalid limits")]
    Limits(#[from] sluice_limit::Error),
    /// A tenant's key variable is not set.
    #[error("tenant {tenant:?}: environment variable {var} is not set")]
    MissingKey {
        /// The tenant.
        tenant: String,
        /// The variable.
        var: String,
    },
    /// A tenant's own upstream credential has no value.
    #[error("tenant {tenant:?}: {key}: environment variable {var} is not set")]
    MissingCredential {
        /// The tenant.
        tenant: String,
        /// The credential, e.g. `apis.slack.auth_env`.
        key: String,
        /// The variable.
        var: String,
    },
    /// A token's variable is not set.
    #[error("{key}: environment variable {var} is not set")]
    MissingToken {
        /// The key that names it, e.g. `ui.token_env`.
        key: &'static str,
        /// The variable.
        var: String,
    },
    /// One secret would name two roles (a tenant key that is also the
    /// admin token).
    #[error("{0}: every key must name one role")]
    SharedKey(String),
    /// The HTTP client could not be built.
    #[error("http client")]
    Client(#[source] Cause),
    /// The OpenTelemetry exporter could not be started.
    #[error("otel")]
    Otel(#[source] Cause),
    /// A serving thread or its runtime could not be started.
    #[error("cannot start a serving thread")]
    Threads(#[source] std::io::Error),
    /// The listener could not bind.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Metrics could not be installed.
    #[error("metrics")]
    Metrics(#[source] crate::metrics::MetricsError),
    /// The `[redis]` settings are unusable.
    #[error("redis")]
    Redis(#[from] sluice_redis::Error),
    /// The job store could not be opened.
    #[error("cannot open the job store {store}")]
    Jobs {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        source: Cause,
    },
    /// The key store could not be opened.
    #[error("cannot open the key store {store}")]
    Keys {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        source: Cause,
    },
    /// The audit trail's store could not be opened.
    #[error("cannot open the audit store {store}")]
    Audit {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        source: Cause,
    },
    /// A store's file is missing although it existed, empty, unreadable
    /// or not a database ([`crate::stores`]): the file and what to do are
    /// the message, not a cause.
    #[error("refusing to start: {0}")]
    Store(crate::stores::Refused),
    /// The job workers could not start.
    #[error("cannot start the job workers: {what}")]
    Workers {
        /// What cannot be used: `queue rates`, `api {name}`, …
        what: String,
        /// Why.
        source: Cause,
    },
    /// A job kind of the embedder's is named as a standard one.
    #[error(
        "cannot start the job workers: job kind {name:?} is a standard kind ({standard}): \
         name yours otherwise"
    )]
    StandardKind {
        /// The kind's name.
        name: String,
        /// The standard kinds.
        standard: String,
    },
    /// The response cache could not be built.
    #[error("response cache")]
    Cache(#[source] Cause),
    /// The usage ledger's store could not be opened.
    #[error("cannot open the usage ledger {store}")]
    Ledger {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        source: Cause,
    },
    /// A price in `[prices]` does not read.
    #[error(transparent)]
    Prices(#[from] sluice_usage::PriceError),
    /// The budgets' count could not be set up.
    #[error("budgets")]
    Budgets(#[source] Cause),
}
