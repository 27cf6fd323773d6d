//! A background writer for records that must not be lost: the audit
//! trail's and the usage ledger's.
//!
//! A [`Spool`] hands records to a task through a bounded queue and never
//! waits: the task writes them into a [`Sink`] in batches, woken once per
//! batch rather than per record (see [`SpoolConfig::linger`]). When the queue
//! is full (or the task has stopped), or a batch cannot be written,
//! records are appended to a spill file (one JSON line each) and counted
//! ([`Spool::spilled`]). So are they when the sink stalls: a write not
//! answered within [`SpoolConfig::stall`] (1 s) puts its batch and the
//! queue in the file, fsynced, and so on every quarter of the bound
//! until it returns (see `stall.rs`). The task writes the spill file into the sink
//! after its next good batch, at start and at shutdown, a batch at a
//! time behind a durable cursor (see `replay.rs`). Only when the
//! spill file itself cannot be written (or there is none) is a record
//! lost: counted ([`Spool::lost`]) and logged whole at `error`, so that it
//! still reaches the operator's logs. [`SpoolTask::shutdown`] is the
//! poison pill: later records spill, the queue is written out, then the
//! spill file.
//!
//! The hand-over alone, [`Queue`], serves a writer that writes elsewhere
//! than a [`Sink`] or does not spill: the gateway's trace writer, which
//! drops and counts what does not fit.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use sluice_spool::{Sink, Spool, SpoolConfig};
//!
//! #[derive(Clone, Default)]
//! struct Memory(Arc<Mutex<Vec<u32>>>);
//!
//! impl Sink<u32> for Memory {
//!     type Error = std::convert::Infallible;
//!     async fn write(&self, batch: &[u32]) -> Result<(), Self::Error> {
//!         self.0.lock().unwrap().extend_from_slice(batch);
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let sink = Memory::default();
//! let (spool, task) = Spool::spawn(sink.clone(), SpoolConfig::new("numbers"));
//! for n in 0..10 {
//!     spool.push(n);
//! }
//! task.shutdown().await; // drains the queue
//! assert_eq!(sink.0.lock().unwrap().len(), 10);
//! assert_eq!(spool.written(), 10);
//! # }
//! ```

mod file;
mod queue;
mod replay;
mod runner;
mod stall;

use std::fmt::Display;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

pub use queue::{Queue, Refused};
use runner::Runner;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The queue's default depth (the seed's 1,000).
pub const DEFAULT_QUEUE: usize = 1_000;

/// Records written per batch by default.
pub const DEFAULT_BATCH: usize = 256;

/// Where a [`Spool`] writes its records.
pub trait Sink<T>: Send + Sync + 'static {
    /// Why a batch was not written.
    type Error: Display + Send;

    /// Stores `batch`, in order, all or nothing (a batch that fails is
    /// spilled and written again later, whole).
    fn write(&self, batch: &[T]) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// How a [`Spool`] runs.
#[derive(Debug, Clone)]
pub struct SpoolConfig {
    /// What it writes, for logs (`audit`, `ledger`).
    pub name: &'static str,
    /// The queue's depth (at least 1).
    pub capacity: usize,
    /// At most this many records per [`Sink::write`] (at least 1).
    pub batch: usize,
    /// The spill file (JSON lines); `None`: records that do not fit are
    /// lost, counted and logged.
    pub spill: Option<PathBuf>,
    /// How long a batch that is not full waits for more records before
    /// it is written ([`DEFAULT_LINGER`]). A steady trickle (a record
    /// per request at 1,000 requests a second) is then written in
    /// batches of tens rather than one transaction per record, and the
    /// writer is woken twice per batch (by its first record, and when
    /// the linger ends or a record fills it), not once per record; zero
    /// writes whatever is queued at once.
    pub linger: Duration,
    /// Runs the writer on a thread of this name with a runtime of its
    /// own, rather than as a task of the runtime that spawns it: its
    /// batches then never hold a worker thread that requests wait for.
    /// `None` (the default): a task.
    pub thread: Option<String>,
    /// A write the sink has not answered within this long is a stall:
    /// its batch and the queue go to the spill file (fsynced), and so
    /// does the queue every quarter of this until it returns ([`DEFAULT_STALL`]; `None`:
    /// only a full queue or a failed write spills). Needs a spill file,
    /// and the writer on a thread of its own (or a sink that does not
    /// block its runtime's thread): the guard that watches runs on the
    /// runtime that spawns the spool.
    pub stall: Option<Duration>,
}

/// A write not answered within this long is a stall by default.
pub const DEFAULT_STALL: Duration = Duration::from_secs(1);

/// A batch that is not full waits this long for more records by default.
pub const DEFAULT_LINGER: Duration = Duration::from_millis(10);

impl SpoolConfig {
    /// [`DEFAULT_QUEUE`], [`DEFAULT_BATCH`], no spill file.
    pub fn new(name: &'static str) -> SpoolConfig {
        SpoolConfig {
            name,
            capacity: DEFAULT_QUEUE,
            batch: DEFAULT_BATCH,
            spill: None,
            linger: DEFAULT_LINGER,
            thread: None,
            stall: Some(DEFAULT_STALL),
        }
    }

    /// With writes not answered within `stall` taken for a stall (`None`:
    /// never).
    #[must_use]
    pub fn stall(mut self, stall: Option<Duration>) -> SpoolConfig {
        self.stall = stall;
        self
    }

    /// With the writer on a thread named `name` (at most 15 bytes are
    /// kept by Linux).
    #[must_use]
    pub fn thread(mut self, name: impl Into<String>) -> SpoolConfig {
        self.thread = Some(name.into());
        self
    }

    /// With batches that wait up to `linger` to fill.
    #[must_use]
    pub fn linger(mut self, linger: Duration) -> SpoolConfig {
        self.linger = linger;
        self
    }

    /// With a queue of `capacity` records.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> SpoolConfig {
        self.capacity = capacity;
        self
    }

    /// With batches of at most `batch` records.
    #[must_use]
    pub fn batch(mut self, batch: usize) -> SpoolConfig {
        self.batch = batch;
        self
    }

    /// Spilling to `path`.
    #[must_use]
    pub fn spill(mut self, path: Option<PathBuf>) -> SpoolConfig {
        self.spill = path;
        self
    }
}

/// Hands records to the writer task without waiting; cheap to clone.
#[derive(Debug)]
pub struct Spool<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Spool<T> {
    fn clone(&self) -> Self {
        Spool {
            inner: self.inner.clone(),
        }
    }
}

/// What the callers and the writer share.
#[derive(Debug)]
struct Inner<T> {
    queue: Queue<T>,
    shared: Shared,
    /// The write in progress, for the stall guard.
    inflight: std::sync::Mutex<stall::Inflight<T>>,
}

/// Closes a spool's queue, whatever its records' type.
trait Close: Send + Sync {
    fn close(&self);
}

impl<T: Send + Sync> Close for Inner<T> {
    fn close(&self) {
        self.queue.close();
    }
}

#[derive(Debug)]
struct Shared {
    name: &'static str,
    batch: usize,
    linger: Duration,
    spill: Option<PathBuf>,
    /// The spill file while it is open for appending (from the first
    /// spill until it is taken for import); held while it is appended to
    /// or taken.
    file: std::sync::Mutex<Option<std::fs::File>>,
    spilled: AtomicU64,
    lost: AtomicU64,
    written: AtomicU64,
    /// Whether the spill file may hold records.
    pending: AtomicBool,
    /// Whether the sink stalls (see `stall.rs`): the guard moves the
    /// queue to the spill file at each look.
    stalled: AtomicBool,
    /// Whether records were appended to the spill file since its last
    /// fsync.
    unsynced: AtomicBool,
    /// Whether the writer has ended.
    done: AtomicBool,
    /// When the spill warning was last logged (ms since `started`), and
    /// how many records spilled since: a full queue under load spills
    /// thousands of records a second, the log says so once per
    /// [`WARN_EVERY`], not once per record.
    started: std::time::Instant,
    warned_ms: AtomicU64,
    unreported: AtomicU64,
}

/// The spill warning is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The writer task; [`SpoolTask::shutdown`] drains it.
pub struct SpoolTask {
    name: &'static str,
    close: Arc<dyn Close>,
    runner: Runner,
}

impl std::fmt::Debug for SpoolTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoolTask")
            .field("name", &self.name)
            .finish()
    }
}

impl<T> Spool<T>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Starts a writer into `sink` (a spill file left by a crash is
    /// written first).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn<S: Sink<T>>(sink: S, config: SpoolConfig) -> (Spool<T>, SpoolTask) {
        let pending = config.spill.as_deref().is_some_and(file::exists);
        let shared = Shared {
            name: config.name,
            batch: config.batch.max(1),
            linger: config.linger,
            spill: config.spill,
            file: std::sync::Mutex::new(None),
            spilled: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            written: AtomicU64::new(0),
            pending: AtomicBool::new(pending),
            stalled: AtomicBool::new(false),
            unsynced: AtomicBool::new(false),
            done: AtomicBool::new(false),
            started: std::time::Instant::now(),
            warned_ms: AtomicU64::new(u64::MAX),
            unreported: AtomicU64::new(0),
        };
        let inner = Arc::new(Inner {
            queue: Queue::new(config.capacity, config.batch),
            shared,
            inflight: std::sync::Mutex::default(),
        });
        if let (Some(stall), Some(_)) = (config.stall, &inner.shared.spill) {
            stall::guard(Arc::downgrade(&inner), stall);
        }
        let runner = Runner::start(
            config.name,
            config.thread.as_deref(),
            run(sink, inner.clone()),
        );
        let task = SpoolTask {
            name: config.name,
            close: inner.clone(),
            runner,
        };
        (Spool { inner }, task)
    }

    /// Queues `record` and returns at once (see the crate doc for a full
    /// queue and a stalled sink).
    pub fn push(&self, record: T) {
        if let Err(r) = self.inner.queue.push(record) {
            self.inner
                .shared
                .spill(std::slice::from_ref(&r.into_inner()));
        }
    }
}

impl<T> Spool<T> {
    /// Records written to the spill file so far.
    pub fn spilled(&self) -> u64 {
        self.inner.shared.spilled.load(Ordering::Relaxed)
    }

    /// Records that could be neither queued nor spilled (each logged).
    pub fn lost(&self) -> u64 {
        self.inner.shared.lost.load(Ordering::Relaxed)
    }

    /// Records the sink has taken so far (spilled ones when written back).
    pub fn written(&self) -> u64 {
        self.inner.shared.written.load(Ordering::Relaxed)
    }

    /// Records waiting in the queue now.
    pub fn queued(&self) -> usize {
        self.inner.queue.len()
    }
}

impl SpoolTask {
    /// Stops taking records (later ones spill), writes out the queue and
    /// the spill file, and waits for the task to end.
    pub async fn shutdown(self) {
        self.close.close();
        self.runner.join(self.name).await;
    }
}

impl Shared {
    /// Appends `records` to the spill file; counts them spilled or lost.
    fn spill<T: Serialize>(&self, records: &[T]) {
        let n = records.len() as u64;
        let written = match &self.spill {
            Some(path) => {
                let mut open = self.file.lock().unwrap_or_else(|e| e.into_inner());
                file::append(&mut open, path, records)
            }
            None => Err(std::io::Error::other("no spill file")),
        };
        match written {
            Ok(()) => {
                self.spilled.fetch_add(n, Ordering::Relaxed);
                self.unsynced.store(true, Ordering::Release);
                self.pending.store(true, Ordering::Release);
                self.warn_spilled(n);
            }
            Err(e) => {
                self.lost.fetch_add(n, Ordering::Relaxed);
                for r in records {
                    let line = serde_json::to_string(r).unwrap_or_default();
                    tracing::error!(spool = self.name, error = %e, record = %line, "record lost");
                }
            }
        }
    }

    /// Fsyncs the spill file if records were appended since the last
    /// time.
    fn sync(&self) {
        if !self.unsynced.swap(false, Ordering::AcqRel) {
            return;
        }
        if let Some(f) = self.file_handle() {
            self.sync_file(&f);
        }
    }

    /// A handle of its own on the open spill file: an fsync takes from
    /// milliseconds to a second on a busy disk, and callers spilling
    /// (on serving threads, in a stall) must not wait for it behind the
    /// file's lock.
    fn file_handle(&self) -> Option<std::fs::File> {
        let open = self.file.lock().unwrap_or_else(|e| e.into_inner());
        open.as_ref().and_then(|f| f.try_clone().ok())
    }

    /// Fsyncs `f`, the spill file; a failure is logged and tried again
    /// at the next look.
    fn sync_file(&self, f: &std::fs::File) {
        if let Err(e) = f.sync_data() {
            self.unsynced.store(true, Ordering::Release);
            tracing::warn!(spool = self.name, error = %e, "spill file not synced");
        }
    }

    /// Logs spilled records: the first at once, then at most once per
    /// [`WARN_EVERY`] with the count since the last line.
    fn warn_spilled(&self, n: u64) {
        self.unreported.fetch_add(n, Ordering::Relaxed);
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        let last = self.warned_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX
            || now.saturating_sub(last) >= u64::try_from(WARN_EVERY.as_millis()).unwrap_or(0);
        if due
            && self
                .warned_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let records = self.unreported.swap(0, Ordering::Relaxed);
            tracing::warn!(
                spool = self.name,
                records,
                total = self.spilled.load(Ordering::Relaxed),
                "queue full or store failing or stalled: records spilled to the spill file (written back later; \
                 logged at most every 10 s)"
            );
        }
    }
}

async fn run<T, S>(sink: S, inner: Arc<Inner<T>>)
where
    T: Serialize + DeserializeOwned + Send + Sync,
    S: Sink<T>,
{
    let (shared, queue) = (&inner.shared, &inner.queue);
    inner.import(&sink).await;
    let mut batch = Vec::with_capacity(shared.batch);
    while queue.next_batch(&mut batch, shared.linger).await {
        let n = batch.len();
        // Shared with the stall guard while it is written.
        let writing = Arc::new(std::mem::take(&mut batch));
        inner.begin_write(Some(Arc::clone(&writing)));
        let written = sink.write(&writing).await;
        let spilled = inner.end_write();
        batch = Arc::try_unwrap(writing).unwrap_or_else(|w| Vec::with_capacity(w.len()));
        match written {
            Ok(()) => {
                shared.written.fetch_add(n as u64, Ordering::Relaxed);
                inner.import(&sink).await;
            }
            Err(e) => {
                tracing::warn!(spool = shared.name, error = %e, records = n, "batch not written");
                // A batch the guard spilled while it waited is in the
                // file already.
                if !spilled {
                    shared.spill(&batch);
                }
            }
        }
        batch.clear();
    }
    inner.import(&sink).await;
    shared.sync();
    shared.done.store(true, Ordering::Release);
}

#[cfg(test)]
mod tests;
