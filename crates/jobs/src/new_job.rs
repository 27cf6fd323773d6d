//! A job to enqueue, with its defaults and validation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use sluice_store::Timestamp;

/// The group and tenant a job gets when none is given.
pub const DEFAULT_GROUP: &str = "default";
/// Attempts a job gets when none is given (the seed's 3).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The longest queue, kind, tenant, group, idempotency key or worker id.
pub const MAX_NAME_LEN: usize = 200;

/// A job to enqueue.
///
/// ```
/// use serde_json::json;
/// use sluice_jobs::NewJob;
///
/// let job = NewJob::new("discord", "discord.create_role", json!({"guild_id": "1", "name": "mod"}))
///     .tenant("acme")
///     .group("guild:1")
///     .priority(5)
///     .idempotency_key("role-mod-1");
/// assert_eq!(job.max_attempts, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// See [`Job::queue`](crate::Job::queue).
    pub queue: String,
    /// See [`Job::kind`](crate::Job::kind).
    pub kind: String,
    /// See [`Job::payload`](crate::Job::payload).
    pub payload: Value,
    /// See [`Job::tenant`](crate::Job::tenant); [`DEFAULT_GROUP`] by default.
    pub tenant: String,
    /// See [`Job::group`](crate::Job::group); [`DEFAULT_GROUP`] by default.
    pub group: String,
    /// See [`Job::priority`](crate::Job::priority); 0 by default.
    pub priority: i32,
    /// See [`Job::idempotency_key`](crate::Job::idempotency_key).
    pub idempotency_key: Option<String>,
    /// See [`Job::max_attempts`](crate::Job::max_attempts); [`DEFAULT_MAX_ATTEMPTS`] by default.
    pub max_attempts: u32,
    /// Not before this instant; now if `None`.
    pub run_at: Option<Timestamp>,
    /// See [`Job::traceparent`](crate::Job::traceparent).
    pub traceparent: Option<String>,
}

impl NewJob {
    /// A job of `kind` on `queue` with everything else at its default.
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, payload: Value) -> Self {
        Self {
            queue: queue.into(),
            kind: kind.into(),
            payload,
            tenant: DEFAULT_GROUP.to_owned(),
            group: DEFAULT_GROUP.to_owned(),
            priority: 0,
            idempotency_key: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            run_at: None,
            traceparent: None,
        }
    }

    /// Sets the trace its attempts continue (a W3C `traceparent`).
    #[must_use]
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Sets the tenant.
    #[must_use]
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// Sets the fairness group.
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Sets the priority (higher first).
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the attempts allowed (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Delays the job until `t`.
    #[must_use]
    pub fn run_at(mut self, t: Timestamp) -> Self {
        self.run_at = Some(t);
        self
    }

    /// Checks every field, naming the first bad one.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for an empty or over-long name, one with a
    /// control character, zero `max_attempts`, or a `traceparent` that is
    /// not one.
    pub fn validate(&self) -> Result<(), crate::Error> {
        check_name("queue", &self.queue)?;
        check_name("kind", &self.kind)?;
        check_name("tenant", &self.tenant)?;
        check_name("group", &self.group)?;
        if let Some(key) = &self.idempotency_key {
            check_name("idempotency_key", key)?;
        }
        if self.max_attempts == 0 {
            return Err(invalid("max_attempts", "must be at least 1"));
        }
        if let Some(tp) = &self.traceparent
            && sluice_limit::headers::context::TraceParent::parse(tp).is_err()
        {
            return Err(invalid(
                "traceparent",
                "must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)",
            ));
        }
        Ok(())
    }
}

/// Checks a name-like field: not empty, at most [`MAX_NAME_LEN`] bytes,
/// no control characters.
pub(crate) fn check_name(field: &'static str, value: &str) -> Result<(), crate::Error> {
    if value.is_empty() {
        Err(invalid(field, "must not be empty"))
    } else if value.len() > MAX_NAME_LEN {
        Err(invalid(field, "is longer than 200 bytes"))
    } else if value.chars().any(char::is_control) {
        // A NUL would make PostgreSQL refuse the statement (a 503 for
        // what is bad input); no name needs a control character.
        Err(invalid(field, "must not contain control characters"))
    } else {
        Ok(())
    }
}

pub(crate) fn invalid(field: &'static str, reason: &'static str) -> crate::Error {
    crate::Error::Invalid { field, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let ok = NewJob::new("q", "k", Value::Null);
        assert!(ok.validate().is_ok());
        let err = ok.clone().max_attempts(0).validate().unwrap_err();
        assert!(err.to_string().contains("max_attempts"), "{err}");
        let err = NewJob::new("", "k", Value::Null).validate().unwrap_err();
        assert!(err.to_string().contains("queue"), "{err}");
        let err = ok.clone().group("a\0b").validate().unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
        let err = ok.clone().idempotency_key("k\n").validate().unwrap_err();
        assert!(err.to_string().contains("idempotency_key"), "{err}");
        let err = ok.group("x".repeat(201)).validate().unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
    }
}
