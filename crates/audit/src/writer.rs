//! [`AuditLog`]: the bounded queue in front of the store, and the task
//! that writes it out in batches.
//!
//! An entry never waits for the database and is never dropped unseen:
//! when the queue is full (or the task has stopped), or a batch cannot be
//! written, entries are appended to the spill file (one JSON line each)
//! and counted ([`AuditLog::spilled`]); the task writes the spill file
//! into the store after its next good batch, at start and at shutdown.
//! Only when the spill file itself cannot be written (or there is none)
//! is an entry lost: counted ([`AuditLog::lost`]) and logged whole at
//! `error`, so that it still reaches the operator's logs.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{AuditStore, NewEntry};

/// The queue's default depth.
pub const DEFAULT_QUEUE: usize = 1_000;

/// Entries written per transaction.
const BATCH: usize = 256;

/// Hands entries to the writer task without waiting; cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<NewEntry>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    spill: Option<PathBuf>,
    /// Held while the spill file is appended to or taken for import.
    lock: Mutex<()>,
    spilled: AtomicU64,
    lost: AtomicU64,
    /// Whether the spill file may hold entries.
    pending: AtomicBool,
}

/// The writer task; [`AuditTask::shutdown`] drains it.
#[derive(Debug)]
pub struct AuditTask {
    close: oneshot::Sender<()>,
    task: JoinHandle<()>,
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
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let (close, close_rx) = oneshot::channel();
        let pending = spill.as_deref().is_some_and(spill_exists);
        let shared = Arc::new(Shared {
            spill,
            lock: Mutex::new(()),
            spilled: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            pending: AtomicBool::new(pending),
        });
        let task = tokio::spawn(run(store, shared.clone(), rx, close_rx));
        (AuditLog { tx, shared }, AuditTask { close, task })
    }

    /// Queues `entry` and returns at once (see the module doc for a full
    /// queue).
    pub fn record(&self, entry: NewEntry) {
        match self.tx.try_send(entry) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(e) | mpsc::error::TrySendError::Closed(e)) => {
                self.shared.spill(std::slice::from_ref(&e));
            }
        }
    }

    /// Entries written to the spill file so far.
    pub fn spilled(&self) -> u64 {
        self.shared.spilled.load(Ordering::Relaxed)
    }

    /// Entries that could be neither queued nor spilled (each logged).
    pub fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }
}

impl AuditTask {
    /// Stops taking entries (later ones spill), writes out the queue and
    /// the spill file, and waits for the task to end.
    pub async fn shutdown(self) {
        let _ = self.close.send(());
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "audit writer task failed");
        }
    }
}

fn importing(spill: &Path) -> PathBuf {
    let mut p = spill.as_os_str().to_owned();
    p.push(".importing");
    PathBuf::from(p)
}

fn spill_exists(spill: &Path) -> bool {
    spill.exists() || importing(spill).exists()
}

impl Shared {
    /// Appends `entries` to the spill file; counts them spilled or lost.
    fn spill(&self, entries: &[NewEntry]) {
        let n = entries.len() as u64;
        let written = match &self.spill {
            Some(path) => {
                let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                append(path, entries)
            }
            None => Err(std::io::Error::other("no spill file")),
        };
        match written {
            Ok(()) => {
                self.spilled.fetch_add(n, Ordering::Relaxed);
                self.pending.store(true, Ordering::Release);
                tracing::warn!(entries = n, "audit queue full or store failing: spilled");
            }
            Err(e) => {
                self.lost.fetch_add(n, Ordering::Relaxed);
                for entry in entries {
                    let line = serde_json::to_string(entry).unwrap_or_default();
                    tracing::error!(error = %e, entry = %line, "audit entry lost");
                }
            }
        }
    }

    /// Writes the spill file into `store`; on failure it stays for the
    /// next try.
    async fn import(&self, store: &AuditStore) {
        let Some(spill) = &self.spill else {
            return;
        };
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let taken = importing(spill);
        {
            // Entries spilled from now on go to a fresh file.
            let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            if !taken.exists()
                && let Err(e) = std::fs::rename(spill, &taken)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(error = %e, "audit spill file not taken");
                self.pending.store(true, Ordering::Release);
                return;
            }
        }
        let entries = match read(&taken) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(error = %e, "audit spill file unreadable");
                self.pending.store(true, Ordering::Release);
                return;
            }
        };
        for chunk in entries.chunks(BATCH) {
            if let Err(e) = store.insert(chunk).await {
                // The whole file is tried again: a transaction per chunk
                // may store a chunk twice only if the remove below fails.
                tracing::warn!(error = %e, "audit spill not written yet");
                self.pending.store(true, Ordering::Release);
                return;
            }
        }
        if let Err(e) = std::fs::remove_file(&taken) {
            tracing::warn!(error = %e, "audit spill file not removed");
        }
        tracing::info!(entries = entries.len(), "audit spill written to the store");
    }
}

fn append(path: &Path, entries: &[NewEntry]) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for e in entries {
        serde_json::to_writer(&mut buf, e)?;
        buf.push(b'\n');
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    // One write: lines of concurrent spills never interleave.
    f.write_all(&buf)
}

/// The entries of a spill file; a line that is not one (a write cut by a
/// crash) is logged and skipped.
fn read(path: &Path) -> std::io::Result<Vec<NewEntry>> {
    let mut out = Vec::new();
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(e) => out.push(e),
            Err(e) => tracing::error!(error = %e, %line, "audit spill line unreadable"),
        }
    }
    Ok(out)
}

async fn run(
    store: AuditStore,
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<NewEntry>,
    mut close: oneshot::Receiver<()>,
) {
    shared.import(&store).await;
    let mut batch = Vec::with_capacity(BATCH);
    let mut watching_close = true;
    loop {
        tokio::select! {
            // Drain first: a close must not overtake queued entries.
            biased;
            n = rx.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    break;
                }
                match store.insert(&batch).await {
                    Ok(()) => shared.import(&store).await,
                    Err(e) => {
                        tracing::warn!(error = %e, entries = n, "audit batch not written");
                        shared.spill(&batch);
                    }
                }
                batch.clear();
            }
            closed = &mut close, if watching_close => {
                watching_close = false;
                if closed.is_ok() {
                    rx.close();
                }
            }
        }
    }
    shared.import(&store).await;
}
