//! A handler's progress reports: [`report_progress`] from inside a run.

use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;
use crate::worker::handler::BoxFuture;

type Report = dyn Fn(Value) -> BoxFuture<'static, Result<(), Error>> + Send + Sync;

/// Records a run's progress in the store, under its lease.
#[derive(Clone)]
pub(crate) struct Reporter(pub(crate) Arc<Report>);

tokio::task_local! {
    static REPORTER: Reporter;
}

/// Runs `f` (a handler's run) with `reporter` as its progress reporter.
pub(crate) async fn scoped<F: std::future::Future>(reporter: Reporter, f: F) -> F::Output {
    REPORTER.scope(reporter, f).await
}

/// Reports the progress of the job the current handler runs: a percent
/// (`json!(40)`) or any JSON (`json!({"rows": 1200, "of": 5000})`), at
/// most 16 KiB as text. It is stored with the job under the run's lease
/// (read at `GET /v1/jobs/{id}` as `progress`) and sent as a `progress`
/// event. Reports are awaited: a handler that reports often pays a write
/// each time.
///
/// ```
/// use serde_json::json;
/// use sluice_jobs::worker::{Outcome, handler_fn, report_progress};
///
/// let handler = handler_fn(|job| async move {
///     for step in 1..=4 {
///         // … a quarter of the work …
///         report_progress(json!(step * 25)).await.ok();
///     }
///     Outcome::Completed(json!({"steps": 4}))
/// });
/// # let _ = handler;
/// ```
///
/// # Errors
/// [`Error::Invalid`] outside a worker's run or for progress too long;
/// [`Error::LeaseLost`] if the run lost its lease (then stop);
/// [`Error::Database`].
pub async fn report_progress(progress: Value) -> Result<(), Error> {
    let reporter = REPORTER
        .try_with(Reporter::clone)
        .map_err(|_| Error::Invalid {
            field: "progress",
            reason: "reported outside a worker's run of a job",
        })?;
    (reporter.0)(progress).await
}
