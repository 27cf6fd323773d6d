//! What a job kind does: the [`JobHandler`] trait, its [`Outcome`], and the
//! registry of handlers by kind.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::job::Job;

/// A boxed, sendable future, as handlers return it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How one run of a job ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done; the value is kept as the job's result.
    Completed(Value),
    /// Failed in a way that may pass: uses an attempt and runs again after
    /// `retry_after` if given, else after the pool's backoff.
    Retry {
        /// What went wrong, kept as the job's last error.
        error: String,
        /// When to try again, if the upstream said.
        retry_after: Option<Duration>,
    },
    /// The upstream said 429: runs again after `retry_after` (else the
    /// backoff) without using an attempt, up to the pool's bound on
    /// consecutive throttles, after which a throttle uses an attempt.
    Throttled {
        /// What the upstream said, kept as the job's last error.
        error: String,
        /// The upstream's Retry-After.
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (a 4xx, an invalid payload): the job goes dead
    /// at once.
    Fatal(String),
}

impl Outcome {
    /// A retryable failure with no wait of its own.
    pub fn retry(error: impl Into<String>) -> Self {
        Outcome::Retry {
            error: error.into(),
            retry_after: None,
        }
    }

    /// A fatal failure.
    pub fn fatal(error: impl Into<String>) -> Self {
        Outcome::Fatal(error.into())
    }
}

/// Runs jobs of one kind.
///
/// A handler must be safe to run again for the same job: delivery is at
/// least once (a worker may crash after the effect and before recording
/// it). A handler that panics is caught; the run counts as a retryable
/// failure.
pub trait JobHandler: Send + Sync + 'static {
    /// Runs `job` once.
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome>;
}

/// A [`JobHandler`] made from an async function of the job.
pub struct HandlerFn<F>(F);

impl<F> fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandlerFn")
    }
}

/// Wraps `f`, an async function of an owned [`Job`], as a [`JobHandler`].
///
/// ```
/// use sluice_jobs::worker::{Outcome, handler_fn};
///
/// let echo = handler_fn(|job| async move { Outcome::Completed(job.payload) });
/// # let _ = echo;
/// ```
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    HandlerFn(f)
}

impl<F, Fut> JobHandler for HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin((self.0)(job.clone()))
    }
}

/// Handlers by kind. A job whose kind has no handler goes dead with an
/// error that says so.
#[derive(Clone, Default)]
pub struct Handlers {
    by_kind: HashMap<String, Arc<dyn JobHandler>>,
}

impl fmt::Debug for Handlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<&str> = self.by_kind.keys().map(String::as_str).collect();
        kinds.sort_unstable();
        f.debug_struct("Handlers").field("kinds", &kinds).finish()
    }
}

impl Handlers {
    /// No handlers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs jobs of `kind` with `handler` (replacing an earlier one).
    #[must_use]
    pub fn on(mut self, kind: impl Into<String>, handler: impl JobHandler) -> Self {
        self.by_kind.insert(kind.into(), Arc::new(handler));
        self
    }

    /// [`on`](Self::on) with a shared handler.
    #[must_use]
    pub fn on_shared(mut self, kind: impl Into<String>, handler: Arc<dyn JobHandler>) -> Self {
        self.by_kind.insert(kind.into(), handler);
        self
    }

    /// Every handler of `other` as well (its own win on a clash).
    #[must_use]
    pub fn merge(mut self, other: Handlers) -> Self {
        self.by_kind.extend(other.by_kind);
        self
    }

    /// The handler of `kind`.
    pub fn get(&self, kind: &str) -> Option<Arc<dyn JobHandler>> {
        self.by_kind.get(kind).cloned()
    }

    /// The kinds with a handler, sorted.
    pub fn kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = self.by_kind.keys().map(String::as_str).collect();
        kinds.sort_unstable();
        kinds
    }
}
