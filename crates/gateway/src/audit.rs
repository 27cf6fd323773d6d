//! The audit trail in the gateway: the store `[audit]` names (beside the
//! jobs: `{data_dir}/audit.db`, or the jobs' PostgreSQL), opened at
//! start-up, written through [`sluice_audit::AuditLog`]'s bounded queue
//! (a request never waits for it) and drained at shutdown.
//!
//! Who acted is an *actor*: `admin` (the admin token), `key:{id}` (a key
//! of the key store), `tenant:{name}` (a static key, or an open gateway's
//! workspace), `upstream` (a provider's 429 or rate-limit headers seen by
//! this gateway or its job workers) or `bus:{replica}` (a reduction
//! another replica announced on the Redis capacity bus).
//!
//! Handlers that change something take [`Act`], which names the request
//! the act was made in: the entry and the answer carry the same
//! `x-request-id`.
//!
//! [`query`] reads the trail for the API and the dashboard.

pub(crate) mod query;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::{IntoResponseParts, Response, ResponseParts};
use serde::Serialize;
use serde_json::{Value, json};
use sluice_audit::{AuditLog, AuditStore, AuditTask, NewEntry};
use sluice_limit::{CapacityChange, ChangeReason};
use tokio_util::task::AbortOnDropHandle;

use crate::config::{Config, StoreLocation};
use crate::error::{Cause, StartError, chain};
use crate::request::X_REQUEST_ID;

/// The actor of the admin token.
pub const ADMIN: &str = "admin";
/// The actor of reductions caused by an upstream's answers.
pub const UPSTREAM: &str = "upstream";

/// The open audit trail: its store (read by `GET /v1/audit`) and its
/// writer.
#[derive(Debug)]
pub struct Audit {
    store: AuditStore,
    log: AuditLog,
    task: tokio::sync::Mutex<Option<AuditTask>>,
    /// Deletes entries past `[audit] retention_days`; stops with this.
    _retention: Option<AbortOnDropHandle<()>>,
}

impl Audit {
    /// Opens the store `config.audit` names (creating the data directory
    /// for SQLite) and starts its writer on the current runtime; entries
    /// spilled by an earlier run are written first.
    ///
    /// # Errors
    /// [`StartError::Audit`] naming the file or URL (password hidden).
    pub async fn open(config: &Config) -> Result<Audit, StartError> {
        let a = &config.audit;
        let location = a.location(&config.data_dir, &config.jobs);
        let fail = |source: Cause| StartError::Audit {
            store: location.display(),
            source,
        };
        location.create_dir().map_err(|e| fail(e.into()))?;
        let store = match &location {
            StoreLocation::Sqlite(path) => AuditStore::open(path).await,
            StoreLocation::Postgres(url) => AuditStore::connect(url).await,
        }
        .map_err(|e| fail(e.into()))?;
        let spill = a.spill_file(&config.data_dir);
        let (log, task) = AuditLog::spawn(store.clone(), a.queue, Some(spill));
        let retention = (a.retention_days > 0).then(|| {
            AbortOnDropHandle::new(tokio::spawn(retention(store.clone(), a.retention_days)))
        });
        Ok(Audit {
            store,
            log,
            task: tokio::sync::Mutex::new(Some(task)),
            _retention: retention,
        })
    }

    /// The store, to read.
    pub fn store(&self) -> &AuditStore {
        &self.store
    }

    /// Queues `entry`; returns at once.
    pub fn record(&self, entry: NewEntry) {
        self.log.record(entry);
    }

    /// Writes out the queue and the spill file, then closes the store.
    /// Entries recorded later spill, for the next start.
    pub async fn close(&self) {
        if let Some(task) = self.task.lock().await.take() {
            task.shutdown().await;
            self.store.close().await;
        }
        let (spilled, lost) = (self.log.spilled(), self.log.lost());
        if spilled > 0 || lost > 0 {
            tracing::warn!(spilled, lost, "audit trail: entries spilled or lost");
        }
    }

    /// A listener for a limiter's `on_change` that records the capacity
    /// reductions (a recovery, or a capacity set by an operator, whom the
    /// route records, is not one).
    pub(crate) fn reductions(&self) -> impl Fn(&CapacityChange) + Send + Sync + 'static {
        let log = self.log.clone();
        move |c| {
            if let Some(entry) = reduction(c) {
                log.record(entry);
            }
        }
    }
}

/// Deletes the entries older than `days`, once an hour (the first time
/// at start-up), like the ledger's retention.
async fn retention(store: AuditStore, days: u64) {
    let mut tick = tokio::time::interval(crate::ledger::RETENTION_EVERY);
    loop {
        tick.tick().await;
        let before = crate::ledger::kept_since(sluice_ledger::now_ms(), days);
        match store.prune(before).await {
            Ok(n) if n > 0 => tracing::info!(entries = n, "audit retention: deleted"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %chain(&e), "audit retention failed"),
        }
    }
}

tokio::task_local! {
    /// Who caused the limiter calls made inside [`caused_by`].
    static CAUSE: Arc<str>;
}

/// Runs `f` with the capacity reductions it causes credited to `actor`
/// (the caller of `/v1/limits/report`); outside, they are the upstream's.
pub(crate) async fn caused_by<F: Future>(actor: Arc<str>, f: F) -> F::Output {
    CAUSE.scope(actor, f).await
}

/// The entry of a change that cut capacity, if it is one.
fn reduction(c: &CapacityChange) -> Option<NewEntry> {
    let cut = matches!(c.reason, ChangeReason::Throttled | ChangeReason::Announced);
    if !cut || c.capacity >= c.previous {
        return None;
    }
    let actor = match &c.announced_by {
        Some(replica) => format!("bus:{replica}"),
        None => CAUSE
            .try_with(|a| a.to_string())
            .unwrap_or_else(|_| UPSTREAM.to_owned()),
    };
    let window_ms = u64::try_from(c.window.as_millis()).unwrap_or(u64::MAX);
    Some(
        NewEntry::now(actor, "capacity.reduce", &c.resource)
            .before(json!({"capacity": c.previous, "window_ms": window_ms}))
            .after(json!({
                "capacity": c.capacity,
                "window_ms": window_ms,
                "configured": c.configured,
                "reason": c.reason.as_str(),
            })),
    )
}

/// The request an administrative act is made in: its id is the client's
/// `x-request-id` when it gave a usable one, else a new one, and the
/// answer carries it (see [`Act::answer`]; a handler that answers
/// `(act, answer)` gives it the same way).
#[derive(Debug, Clone)]
pub struct Act {
    request_id: Arc<str>,
}

impl<S: Send + Sync> FromRequestParts<S> for Act {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let id = crate::request::client_request_id(&parts.headers)
            .map_or_else(crate::request::new_id, str::to_owned);
        Ok(Act {
            request_id: id.into(),
        })
    }
}

impl Act {
    /// An entry of `kind` by `actor` on `target`, in this request.
    pub fn entry(&self, actor: &str, kind: &str, target: &str) -> NewEntry {
        NewEntry::now(actor, kind, target).request(&*self.request_id)
    }

    /// `answer` with this request's id (unless it has one), so that the
    /// caller can find its act in the trail.
    pub fn answer(&self, mut answer: Response) -> Response {
        if !answer.headers().contains_key(X_REQUEST_ID)
            && let Ok(v) = HeaderValue::from_str(&self.request_id)
        {
            answer.headers_mut().insert(X_REQUEST_ID, v);
        }
        answer
    }
}

impl IntoResponseParts for Act {
    type Error = Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Infallible> {
        if !res.headers().contains_key(X_REQUEST_ID)
            && let Ok(v) = HeaderValue::from_str(&self.request_id)
        {
            res.headers_mut().insert(X_REQUEST_ID, v);
        }
        Ok(res)
    }
}

/// `v` as JSON for an entry's before or after (`null` if it cannot be).
pub(crate) fn snapshot(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn change(previous: u64, capacity: u64, reason: ChangeReason) -> CapacityChange {
        CapacityChange {
            resource: "openai/gpt-4o".into(),
            previous,
            capacity,
            configured: 100,
            window: Duration::from_secs(1),
            reason,
            at: Instant::now(),
            announced_by: None,
        }
    }

    #[tokio::test]
    async fn only_cuts_are_recorded_and_credited_to_their_cause() {
        assert!(reduction(&change(50, 100, ChangeReason::Recovered)).is_none());
        assert!(reduction(&change(100, 10, ChangeReason::Configured)).is_none());
        assert!(reduction(&change(50, 80, ChangeReason::Announced)).is_none());
        let e = reduction(&change(100, 50, ChangeReason::Throttled)).unwrap();
        assert_eq!(
            (e.actor.as_str(), e.kind.as_str()),
            (UPSTREAM, "capacity.reduce")
        );
        assert_eq!(e.before.unwrap()["capacity"], 100);
        assert_eq!(e.after.as_ref().unwrap()["capacity"], 50);
        assert_eq!(e.after.unwrap()["reason"], "throttled");
        let e = caused_by(Arc::from("key:k1"), async {
            reduction(&change(100, 40, ChangeReason::Announced))
        })
        .await
        .unwrap();
        assert_eq!(e.actor, "key:k1");
        let mut heard = change(100, 50, ChangeReason::Throttled);
        heard.announced_by = Some("replica-b".into());
        let e = caused_by(Arc::from("key:k1"), async { reduction(&heard) })
            .await
            .unwrap();
        assert_eq!(e.actor, "bus:replica-b");
    }
}
