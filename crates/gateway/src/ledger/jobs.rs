//! Job attempts in the ledger: every handler the workers run is wrapped
//! so that each run leaves one record (tenant, kind, API, outcome, time).

use std::sync::Arc;
use std::time::Instant;

use sluice_jobs::Job;
use sluice_jobs::worker::{BoxFuture, Handlers, JobHandler, Outcome};
use sluice_ledger::Record;

use super::UsageLedger;

/// `handlers`, each recording its runs in `ledger`.
pub(crate) fn recorded(handlers: &Handlers, ledger: &Arc<UsageLedger>) -> Handlers {
    let mut out = Handlers::new();
    for kind in handlers.kinds() {
        if let Some(inner) = handlers.get(kind) {
            let wrapped = Recorded {
                inner,
                ledger: ledger.clone(),
            };
            out = out.on(kind, wrapped);
        }
    }
    out
}

struct Recorded {
    inner: Arc<dyn JobHandler>,
    ledger: Arc<UsageLedger>,
}

impl JobHandler for Recorded {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let started = Instant::now();
            let outcome = self.inner.run(job).await;
            self.ledger.submit(record(job, &outcome, started));
            outcome
        })
    }
}

/// The record of one run of `job` that ended in `outcome`. A job attempt
/// has no HTTP status of its own: completed is 200, throttled 429, a
/// retryable failure 502, a fatal one 400.
fn record(job: &Job, outcome: &Outcome, started: Instant) -> Record {
    // The API an `http` job called; the Discord kinds call Discord.
    let api = job.payload.get("api").and_then(|a| a.as_str()).unwrap_or(
        if job.kind.starts_with("discord") {
            "discord"
        } else {
            ""
        },
    );
    let mut r = Record::new(
        format!("{}#{}", job.id, job.attempts),
        job.tenant.clone(),
        "job",
        api,
        job.kind.clone(),
        format!("job:{}", job.kind),
    );
    r.status = match outcome {
        Outcome::Completed(_) => 200,
        Outcome::Throttled { .. } => 429,
        Outcome::Retry { .. } => 502,
        Outcome::Fatal(_) => 400,
    };
    r.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    r.retries = job.attempts.saturating_sub(1);
    r
}
