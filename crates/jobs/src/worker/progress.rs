//! What a handler may ask of the store from inside a run: report its
//! progress ([`report_progress`]), read its flow children ([`children`]).

use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;
use crate::job::Job;
use crate::worker::handler::BoxFuture;

type Report = dyn Fn(Value) -> BoxFuture<'static, Result<(), Error>> + Send + Sync;
type Children = dyn Fn() -> BoxFuture<'static, Result<Vec<Job>, Error>> + Send + Sync;

/// Records a run's progress in the store, under its lease, and reads the
/// job's flow children.
#[derive(Clone)]
pub(crate) struct Reporter(pub(crate) Arc<Report>, pub(crate) Arc<Children>);

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

/// The flow children of the job the current handler runs (a flow's
/// parent runs once they are done: see [`crate::flow`]), in id order,
/// each with its state and result.
///
/// # Errors
/// [`Error::Invalid`] outside a worker's run; [`Error::Database`].
pub async fn children() -> Result<Vec<Job>, Error> {
    let reporter = REPORTER
        .try_with(Reporter::clone)
        .map_err(|_| Error::Invalid {
            field: "parent",
            reason: "asked for children outside a worker's run of a job",
        })?;
    (reporter.1)().await
}
