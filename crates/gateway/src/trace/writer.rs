//! The background trace writer: a bounded channel in front of a task that
//! appends JSON lines to per-thread files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::fs::{File, OpenOptions};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::TraceRecord;
use super::path::trace_path;

/// Open files kept between writes; the least recently used is closed
/// when another is needed.
const OPEN_FILES: usize = 256;

/// Records taken off the channel per write round, so that a burst costs
/// one write per file rather than one per record.
const BATCH: usize = 256;

/// Hands finished traces to the writer task without ever waiting; cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct TraceWriter {
    tx: mpsc::Sender<TraceRecord>,
    dropped: Arc<AtomicU64>,
}

/// The writer task. [`TraceWriterTask::shutdown`] stops intake and writes
/// out what is queued; otherwise the task ends once every [`TraceWriter`]
/// is dropped.
#[derive(Debug)]
pub struct TraceWriterTask {
    close: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl TraceWriter {
    /// Starts a writer for `dir` with room for `buffer` queued traces
    /// (at least 1).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(dir: PathBuf, buffer: usize) -> (TraceWriter, TraceWriterTask) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let (close, close_rx) = oneshot::channel();
        let task = tokio::spawn(run(dir, rx, close_rx));
        let writer = TraceWriter {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (writer, TraceWriterTask { close, task })
    }

    /// Queues `record` for writing and returns at once. When the buffer is
    /// full or the writer has shut down, the trace is dropped, counted in
    /// [`TraceWriter::dropped`] and `sluice_traces_dropped_total`, and
    /// `false` returned: a slow disk must not slow requests.
    pub fn submit(&self, record: TraceRecord) -> bool {
        let reason = match self.tx.try_send(record) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Full(_)) => "buffer_full",
            Err(mpsc::error::TrySendError::Closed(_)) => "closed",
        };
        self.dropped.fetch_add(1, Ordering::Relaxed);
        crate::metrics::trace_dropped(reason, 1);
        false
    }

    /// Traces this writer (and its clones) dropped, for a full buffer or
    /// after shutdown.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl TraceWriterTask {
    /// Stops accepting traces (later submits count as dropped), writes out
    /// everything already queued, fsyncs the open files and waits for the
    /// task to end.
    pub async fn shutdown(self) {
        // The task may already have ended (every writer dropped).
        let _ = self.close.send(());
        wait(self.task).await;
    }

    /// Waits for the task to end on its own, which it does once every
    /// [`TraceWriter`] is dropped and the queue is written out and fsynced.
    pub async fn join(self) {
        // Dropping `close` unsent is not a request to close: the task
        // only stops watching it.
        wait(self.task).await;
    }
}

async fn wait(task: JoinHandle<()>) {
    if let Err(e) = task.await {
        tracing::error!(error = %e, "trace writer task failed");
    }
}

async fn run(dir: PathBuf, mut rx: mpsc::Receiver<TraceRecord>, mut close: oneshot::Receiver<()>) {
    let mut files = OpenFiles::new(OPEN_FILES);
    let mut watching_close = true;
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            // Drain first: a close request must not overtake queued traces.
            biased;
            n = rx.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    break;
                }
                write_batch(&dir, &mut files, &mut batch).await;
            }
            closed = &mut close, if watching_close => {
                watching_close = false;
                if closed.is_ok() {
                    // New sends fail from here on; what is queued still
                    // comes out of `recv_many`, then it returns 0.
                    rx.close();
                }
            }
        }
    }
    files.sync_all().await;
}

/// Appends each record as one line to its thread's file, one write per file
/// per batch, keeping the order of records within each file.
async fn write_batch(dir: &Path, files: &mut OpenFiles, batch: &mut Vec<TraceRecord>) {
    let mut by_file: Vec<(PathBuf, Vec<u8>, u64)> = Vec::new();
    let mut index: HashMap<PathBuf, usize> = HashMap::new();
    for record in batch.drain(..) {
        let path = trace_path(dir, &record.workspace, &record.thread);
        let i = *index.entry(path.clone()).or_insert_with(|| {
            by_file.push((path, Vec::new(), 0));
            by_file.len() - 1
        });
        let (_, buf, count) = &mut by_file[i];
        match serde_json::to_writer(&mut *buf, &record) {
            Ok(()) => {
                buf.push(b'\n');
                *count += 1;
            }
            Err(e) => {
                tracing::warn!(error = %e, trace_id = %record.trace_id, "trace not serializable");
                crate::metrics::trace_dropped("write_error", 1);
            }
        }
    }
    for (path, buf, count) in by_file {
        if let Err(e) = files.append(&path, &buf).await {
            // Log and go on: a full or broken disk loses traces, never
            // the writer or the gateway.
            tracing::warn!(error = %e, path = %path.display(), traces = count, "trace write failed");
            crate::metrics::trace_dropped("write_error", count);
        }
    }
}

/// A bounded cache of files open for appending.
struct OpenFiles {
    max: usize,
    tick: u64,
    open: HashMap<PathBuf, (File, u64)>,
}

impl OpenFiles {
    fn new(max: usize) -> OpenFiles {
        OpenFiles {
            max: max.max(1),
            tick: 0,
            open: HashMap::new(),
        }
    }

    async fn append(&mut self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.tick += 1;
        if !self.open.contains_key(path) {
            let file = open_append(path).await?;
            if self.open.len() >= self.max {
                self.evict().await;
            }
            self.open.insert(path.to_owned(), (file, self.tick));
        }
        let Some((file, used)) = self.open.get_mut(path) else {
            unreachable!("inserted above");
        };
        *used = self.tick;
        // `flush` waits for tokio's background write, so its error is seen
        // here rather than lost when the file is dropped.
        let written = match file.write_all(bytes).await {
            Ok(()) => file.flush().await,
            Err(e) => Err(e),
        };
        if written.is_err() {
            // Reopen next time: the file may have been removed or rotated.
            self.open.remove(path);
        }
        written
    }

    /// Closes the least recently used file. Its data has reached the OS
    /// (it survives a crash of the process, not of the machine); only the
    /// files open at shutdown are fsynced.
    async fn evict(&mut self) {
        let oldest = self
            .open
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(p, _)| p.clone());
        if let Some((mut file, _)) = oldest.and_then(|p| self.open.remove(&p)) {
            let _ = file.flush().await;
        }
    }

    async fn sync_all(&mut self) {
        for (path, (file, _)) in &mut self.open {
            if let Err(e) = file.sync_data().await {
                tracing::warn!(error = %e, path = %path.display(), "trace fsync failed");
            }
        }
    }
}

async fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
}
