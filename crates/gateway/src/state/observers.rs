//! [`Observers`]: what the gateway tells about itself — metrics, traces,
//! OpenTelemetry spans, the live dashboard, the audit trail and the usage
//! ledger — and their writers, flushed at shutdown.

use std::sync::Arc;

use sluice_audit::NewEntry;
use tokio::sync::Mutex;

use crate::audit::Audit;
use crate::dashboard::Board;
use crate::ledger::UsageLedger;
use crate::metrics::{Metrics, Refresh};
use crate::trace::{TraceWriter, TraceWriterTask};

/// The observers substate.
#[derive(Debug)]
pub(crate) struct Observers {
    pub(crate) metrics: Metrics,
    /// The gauges `/metrics` reads from the job store and the limiter,
    /// refreshed at most once per `metrics.refresh_interval_ms`.
    pub(crate) gauges: Refresh,
    /// `None` when traces are off.
    pub(crate) traces: Option<TraceWriter>,
    /// The OpenTelemetry exporter; `None` without `[otel]`.
    pub(crate) otel: Option<sluice_otel::Exporter>,
    /// The live dashboard's totals, history and stream.
    pub(crate) board: Arc<Board>,
    /// The audit trail (`[audit] enabled`).
    pub(crate) audit: Option<Audit>,
    /// The usage ledger (`[ledger] enabled`).
    pub(crate) ledger: Option<Arc<UsageLedger>>,
    pub(crate) trace_task: Mutex<Option<TraceWriterTask>>,
    pub(crate) otel_task: Mutex<Option<sluice_otel::ExporterTask>>,
}

impl Observers {
    /// Records `entry` in the audit trail, when it is on; never waits.
    pub(crate) fn record(&self, entry: NewEntry) {
        if let Some(audit) = &self.audit {
            audit.record(entry);
        }
    }

    /// Whether the audit trail is on (a handler reads the state before a
    /// change only then).
    pub(crate) fn audited(&self) -> bool {
        self.audit.is_some()
    }

    /// Writes out every queued trace, span, audit entry and ledger record
    /// and stops the writers.
    pub(crate) async fn shutdown(&self) {
        if let Some(task) = self.trace_task.lock().await.take() {
            task.shutdown().await;
        }
        if let Some(task) = self.otel_task.lock().await.take() {
            task.shutdown().await;
        }
        if let Some(audit) = &self.audit {
            audit.close().await;
        }
        if let Some(ledger) = &self.ledger {
            ledger.shutdown().await;
        }
    }
}
