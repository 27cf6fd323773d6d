//! Spill on stall, not on full: a write the sink has not answered within
//! [`SpoolConfig::stall`](crate::SpoolConfig::stall) puts what waits in
//! memory on disk.
//!
//! A store that stalls (a database locked by another writer, a network
//! that holds packets) is when records pile up in memory, and a full
//! queue is a late sign: a crash before it fills loses the whole queue.
//! So a guard task, on the runtime that started the spool (not the
//! writer's thread, which a blocked write may hold), looks every quarter
//! of the bound: once a write has been waiting longer than the bound, it
//! appends the batch being written and the queue to the spill file and
//! fsyncs it, and does so with the queue at every look until the write
//! returns. The guard also fsyncs the file whenever records were
//! appended since its last look (a full queue spills on the callers'
//! threads). A crash of the process (kill -9) in a stall loses at most
//! what was handed over since the last look (a quarter of the bound,
//! plus the time the fsync took); of the machine, what was appended
//! since the last fsync.
//!
//! Callers never write the file themselves in a stall: an fsync of a
//! file holds its appends on common filesystems (a busy disk: hundreds
//! of milliseconds), and the serving threads must not wait for it. They
//! queue as usual, and the guard moves the queue.
//!
//! The batch spilled while its write still runs may be stored by that
//! write after all: it is then written again from the file, and only a
//! sink with idempotent writes (the usage ledger's, keyed by record)
//! stores it once.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::Inner;

/// The write in progress, as the guard sees it.
#[derive(Debug)]
pub(crate) struct Inflight<T> {
    /// The batch from the queue being written (`None` for a batch of the
    /// spill file, which is on disk already).
    batch: Option<Arc<Vec<T>>>,
    /// When the write began; `None` between writes.
    since: Option<Instant>,
    /// Whether the guard put `batch` in the spill file.
    spilled: bool,
}

impl<T> Default for Inflight<T> {
    fn default() -> Self {
        Inflight {
            batch: None,
            since: None,
            spilled: false,
        }
    }
}

impl<T> Inner<T> {
    fn inflight(&self) -> std::sync::MutexGuard<'_, Inflight<T>> {
        self.inflight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A write of `batch` (or of a batch of the spill file: `None`)
    /// begins.
    pub(crate) fn begin_write(&self, batch: Option<Arc<Vec<T>>>) {
        *self.inflight() = Inflight {
            batch,
            since: Some(Instant::now()),
            spilled: false,
        };
    }

    /// The write returned: the queue is the writer's again. Whether the
    /// guard spilled its batch meanwhile.
    pub(crate) fn end_write(&self) -> bool {
        let was = std::mem::take(&mut *self.inflight());
        if self.shared.stalled.swap(false, Ordering::AcqRel) {
            tracing::info!(spool = self.shared.name, "store answering again");
        }
        was.spilled
    }
}

impl<T: Serialize + Send + Sync + 'static> Inner<T> {
    /// One look: spills what waits in memory if a write has waited
    /// longer than `stall`; fsyncs what was spilled.
    fn look(&self, stall: Duration) {
        {
            let mut inflight = self.inflight();
            let waited = inflight.since.is_some_and(|s| s.elapsed() >= stall);
            if waited {
                if !self.shared.stalled.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        spool = self.shared.name,
                        stall_ms = u64::try_from(stall.as_millis()).unwrap_or(u64::MAX),
                        "store stalled: records go to the spill file until it answers"
                    );
                }
                if !inflight.spilled
                    && let Some(batch) = &inflight.batch
                {
                    self.shared.spill(batch);
                    inflight.spilled = true;
                }
            }
        }
        if self.shared.stalled.load(Ordering::Acquire) {
            // What came since the last look.
            let queued = self.queue.drain();
            if !queued.is_empty() {
                self.shared.spill(&queued);
            }
        }
        self.shared.sync();
    }
}

/// Starts the guard of `inner` (see the module doc) on the current
/// runtime; it ends when the writer has ended or the spool is dropped.
pub(crate) fn guard<T: Serialize + Send + Sync + 'static>(inner: Weak<Inner<T>>, stall: Duration) {
    let every = (stall / 4).max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let done = inner.shared.done.load(Ordering::Acquire);
            // Appends and an fsync (up to a second on a busy disk): on a
            // blocking thread, not one of the runtime's workers.
            let _ = tokio::task::spawn_blocking(move || inner.look(stall)).await;
            if done {
                return;
            }
        }
    });
}
