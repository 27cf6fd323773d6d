//! Why one candidate's call gave up: what the fallback layer reads to
//! decide whether another model may do better, and turns into the
//! client's answer otherwise.

use std::time::Duration;

use crate::error::ApiError;

/// Why a call gave up.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The limiter would not grant in time (or the pool was full, or the
    /// call could not be made at all).
    Limited(ApiError),
    /// The upstream kept answering 429.
    Throttled {
        retry_after: Option<Duration>,
        attempts: u32,
    },
    /// The upstream kept failing.
    Upstream { message: String, attempts: u32 },
    /// The deadline passed during an attempt.
    Timeout { attempts: u32 },
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure::Limited(e)
    }
}

impl Failure {
    /// Whether another model may do better.
    pub(crate) fn may_fall_back(&self) -> bool {
        !matches!(self, Failure::Limited(ApiError::TooLarge(_)))
    }

    /// The upstream attempts made before giving up.
    pub(crate) fn attempts(&self) -> u32 {
        match self {
            Failure::Limited(_) => 0,
            Failure::Throttled { attempts, .. }
            | Failure::Upstream { attempts, .. }
            | Failure::Timeout { attempts } => *attempts,
        }
    }

    /// The same failure, counted as `attempts` in all (a pool's tries on
    /// several deployments).
    #[must_use]
    pub(crate) fn after(self, attempts: u32) -> Self {
        match self {
            Failure::Limited(e) => Failure::Limited(e),
            Failure::Throttled { retry_after, .. } => Failure::Throttled {
                retry_after,
                attempts,
            },
            Failure::Upstream { message, .. } => Failure::Upstream { message, attempts },
            Failure::Timeout { .. } => Failure::Timeout { attempts },
        }
    }

    /// What went wrong in a word (an OpenTelemetry `error.type`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Failure::Limited(_) => "refused",
            Failure::Throttled { .. } => "throttled",
            Failure::Upstream { .. } => "upstream_error",
            Failure::Timeout { .. } => "timeout",
        }
    }

    /// What went wrong in a sentence.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Limited(e) => e.to_string(),
            Failure::Throttled { attempts, .. } => {
                format!("upstream answered 429 after {attempts} attempts")
            }
            Failure::Upstream { message, .. } => message.clone(),
            Failure::Timeout { attempts } => {
                format!("the deadline passed after {attempts} attempts")
            }
        }
    }

    /// The client's answer, `what` naming the model or API.
    pub(crate) fn into_error(self, what: &str) -> ApiError {
        match self {
            Failure::Limited(e) => e,
            Failure::Throttled { retry_after, .. } => ApiError::RateLimited {
                resource: what.to_owned(),
                retry_after: retry_after.or(Some(Duration::from_secs(1))),
                policy: None,
            },
            Failure::Upstream { message, .. } => ApiError::BadGateway(message),
            Failure::Timeout { .. } => ApiError::Timeout(format!("waiting for {what}")),
        }
    }
}

/// A transport error in a sentence, without URLs' secrets.
pub(crate) fn describe(e: &crate::client::TransportError) -> String {
    e.to_string()
}
