//! [`AuditLog`]: the bounded queue in front of the store, and the task
//! that writes it out in batches — a [`sluice_spool::Spool`] of entries.
//!
//! An entry never waits for the database and is never dropped unseen:
//! when the queue is full (or the task has stopped), or a batch cannot be
//! written, entries are appended to the spill file (one JSON line each)
//! and counted ([`AuditLog::spilled`]); the task writes the spill file
//! into the store after its next good batch, at start and at shutdown.
//! Only when the spill file itself cannot be written (or there is none)
//! is an entry lost: counted ([`AuditLog::lost`]) and logged whole at
//! `error`, so that it still reaches the operator's logs.

use std::path::PathBuf;

use sluice_spool::{Sink, Spool, SpoolConfig};

use crate::{AuditStore, Error, NewEntry};

/// The queue's default depth.
pub const DEFAULT_QUEUE: usize = sluice_spool::DEFAULT_QUEUE;

/// The writer task; [`AuditTask::shutdown`] drains it.
pub type AuditTask = sluice_spool::SpoolTask;

/// Hands entries to the writer task without waiting; cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditLog {
    spool: Spool<NewEntry>,
}

impl Sink<NewEntry> for AuditStore {
    type Error = Error;

    async fn write(&self, batch: &[NewEntry]) -> Result<(), Error> {
        self.insert(batch).await
    }
}

impl AuditLog {
    /// Starts a writer into `store` with a queue of `capacity` entries (at
    /// least 1), spilling to `spill` (a JSON-lines file; `None`: entries
    /// that do not fit are lost, counted and logged).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(
        store: AuditStore,
        capacity: usize,
        spill: Option<PathBuf>,
    ) -> (AuditLog, AuditTask) {
        let config = SpoolConfig::new("audit").capacity(capacity).spill(spill);
        let (spool, task) = Spool::spawn(store, config);
        (AuditLog { spool }, task)
    }

    /// Queues `entry` and returns at once (see the module doc for a full
    /// queue).
    pub fn record(&self, entry: NewEntry) {
        self.spool.push(entry);
    }

    /// Entries written to the spill file so far.
    pub fn spilled(&self) -> u64 {
        self.spool.spilled()
    }

    /// Entries that could be neither queued nor spilled (each logged).
    pub fn lost(&self) -> u64 {
        self.spool.lost()
    }
}
