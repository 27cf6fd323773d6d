//! Job attempts as OpenTelemetry spans: every kind's handler wrapped so
//! that a sampled attempt is exported as one span (`job {kind}`, kind
//! CONSUMER: the processing of a queued job) in the job's trace (the
//! enqueuer's, as a child of its span, when it sent a `traceparent`),
//! and is the parent the upstream sees in the attempt's `traceparent`.

use std::sync::Arc;

use sluice_jobs::Job;
use sluice_jobs::worker::{BoxFuture, Handlers, JobHandler, Outcome};
use sluice_otel::{Clock, Exporter, Kind, Span, Status};
use tokio::time::Instant;

/// `handlers` with each kind's attempts exported through `exporter`.
pub(super) fn traced(handlers: Handlers, exporter: &Exporter) -> Handlers {
    let mut out = Handlers::new();
    for kind in handlers.kinds() {
        if let Some(inner) = handlers.get(kind) {
            out = out.on(
                kind,
                Traced {
                    inner,
                    exporter: exporter.clone(),
                },
            );
        }
    }
    out
}

struct Traced {
    inner: Arc<dyn JobHandler>,
    exporter: Exporter,
}

impl JobHandler for Traced {
    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let mut span = sluice_jobs_http::context::attempt_span(job);
            // The enqueuer's span, when it sent one: its flags decide.
            let parent = job
                .traceparent
                .as_deref()
                .and_then(|tp| sluice_limit::headers::context::TraceParent::parse(tp).ok());
            let decided = parent.map(|p| p.flags & 1 == 1);
            if !self.exporter.sampled(&span.trace_id, decided) {
                return self.inner.run(job).await;
            }
            span.flags = 1;
            let started = Instant::now();
            let clock = Clock::at(started);
            let outcome = sluice_jobs_http::context::in_span(span, self.inner.run(job)).await;
            let mut s = Span::new(
                span.trace_id,
                parent.map(|p| p.span_id),
                format!("job {}", job.kind),
                Kind::Consumer,
                clock.unix_nanos(started),
                clock.unix_nanos(Instant::now()),
            );
            s.span_id = span.span_id;
            s.remote_parent = parent.is_some();
            s.set("messaging.system", "sluice")
                .set("messaging.operation.type", "process")
                .set("messaging.destination.name", job.queue.clone())
                .set("messaging.message.id", job.id.0.to_string())
                .set("sluice.job.kind", job.kind.clone())
                .set("sluice.job.attempt", job.attempts.saturating_add(1))
                .set("sluice.tenant", job.tenant.clone());
            let (result, error) = match &outcome {
                Outcome::Completed(_) => ("completed", None),
                Outcome::Retry { error, .. } => ("retry", Some(error)),
                Outcome::Throttled { error, .. } => ("throttled", Some(error)),
                Outcome::Fatal(error) => ("fatal", Some(error)),
            };
            s.set("sluice.job.outcome", result);
            if let Some(e) = error {
                s.set("error.type", result);
                s.status = Status::Error(e.clone());
            }
            self.exporter.submit(vec![s]);
            outcome
        })
    }
}
