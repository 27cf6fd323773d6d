//! The background trace writer: a bounded [`Queue`] (`sluice-spool`'s,
//! the audit trail's and the ledger's hand-over too) in front of a task
//! that appends JSON lines to per-workspace files (see [`Store`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_spool::{Queue, Refused};
use tokio::task::JoinHandle;

use super::line::Line;
use super::path::{Rotation, period};
use super::store::{Retention, Store};
use super::{Trace, TraceRecord};

/// Records taken off the queue per write round, so that a burst costs
/// one write per file rather than one per record.
pub(super) const BATCH: usize = 256;

/// How long a write round waits for more traces after the first, unless
/// the batch fills first. Without it a steady stream of requests costs a
/// hop to a blocking thread and a write per request (each trace alone in
/// its round); with it, at most one round per `LINGER`, and a trace
/// reaches its file at most this much later. Traces that come during the
/// linger do not wake the writer (each would be a cross-thread hop: the
/// writer is on the gateway's background thread), only a full batch
/// does ([`Queue::next_batch`]).
pub(super) const LINGER: std::time::Duration = std::time::Duration::from_millis(50);

/// Hands finished traces to the writer task without ever waiting; cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct TraceWriter {
    intake: Arc<Intake>,
    dropped: Arc<AtomicU64>,
}

/// The writers' side of the queue: when the last [`TraceWriter`] goes,
/// it closes the queue, and the task writes out what is queued and ends.
#[derive(Debug)]
struct Intake(Arc<Queue<Line>>);

impl Drop for Intake {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The writer task. [`TraceWriterTask::shutdown`] stops intake and writes
/// out what is queued; otherwise the task ends once every [`TraceWriter`]
/// is dropped.
#[derive(Debug)]
pub struct TraceWriterTask {
    queue: Arc<Queue<Line>>,
    task: JoinHandle<()>,
}

impl TraceWriter {
    /// Starts a writer for `dir` with room for `buffer` queued traces
    /// (at least 1), keeping the directory within `retention`. Files
    /// already there count against its caps.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(
        dir: PathBuf,
        buffer: usize,
        retention: Retention,
    ) -> (TraceWriter, TraceWriterTask) {
        let queue = Arc::new(Queue::new(buffer, BATCH));
        let task = tokio::spawn(run(dir, retention, Arc::clone(&queue)));
        let writer = TraceWriter {
            intake: Arc::new(Intake(Arc::clone(&queue))),
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (writer, TraceWriterTask { queue, task })
    }

    /// Queues `record` for writing and returns at once. When the buffer is
    /// full or the writer has shut down, the trace is dropped, counted in
    /// [`TraceWriter::dropped`] and `sluice_traces_dropped_total`, and
    /// `false` returned: a slow disk must not slow requests, and traces,
    /// unlike the ledger's records, are not worth a spill file.
    pub fn submit(&self, record: TraceRecord) -> bool {
        match Line::of_record(&record) {
            Ok(line) => self.send(line),
            Err(e) => {
                tracing::warn!(error = %e, trace_id = %record.trace_id, "trace not serializable");
                crate::metrics::trace_dropped("write_error", 1);
                false
            }
        }
    }

    /// Ends `trace` and queues it, as [`TraceWriter::submit`] does a
    /// record: its line is written on the writer's thread, not the
    /// request's.
    pub(crate) fn submit_trace(&self, trace: Trace) -> bool {
        self.send(trace.ended())
    }

    fn send(&self, line: Line) -> bool {
        let reason = match self.intake.0.push(line) {
            Ok(()) => return true,
            Err(Refused::Full(_)) => "buffer_full",
            Err(Refused::Closed(_)) => "closed",
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
        self.queue.close();
        wait(self.task).await;
    }

    /// Waits for the task to end on its own, which it does once every
    /// [`TraceWriter`] is dropped and the queue is written out and fsynced.
    pub async fn join(self) {
        wait(self.task).await;
    }
}

async fn wait(task: JoinHandle<()>) {
    if let Err(e) = task.await {
        tracing::error!(error = %e, "trace writer task failed");
    }
}

async fn run(dir: PathBuf, retention: Retention, queue: Arc<Queue<Line>>) {
    let opened = tokio::task::spawn_blocking(move || Store::open(dir, retention)).await;
    let Ok(mut store) = opened else {
        // Every later trace is counted as dropped (`closed`) rather than
        // queued for nobody; those already queued are counted here.
        tracing::error!("trace writer failed to start");
        discard(&queue).await;
        return;
    };
    let mut batch = Vec::with_capacity(BATCH);
    let mut spare = Spare::default();
    // A close does not overtake queued traces: they come out first.
    while queue.next_batch(&mut batch, LINGER).await {
        // One hop to a blocking thread per batch; the store, the emptied
        // batch and its buffers come back for the next one.
        let rotate = retention.rotate;
        let wrote = tokio::task::spawn_blocking(move || {
            write_batch(&mut store, rotate, &mut batch, &mut spare);
            (store, batch, spare)
        })
        .await;
        match wrote {
            Ok(back) => (store, batch, spare) = back,
            Err(e) => {
                tracing::error!(error = %e, "trace writer failed");
                discard(&queue).await;
                return;
            }
        }
    }
    let _ = tokio::task::spawn_blocking(move || store.sync_all()).await;
}

/// The lines' buffers of earlier batches, emptied, for the next: a
/// batch's lines are written into memory that is already there.
#[derive(Default)]
struct Spare(Vec<Vec<u8>>);

impl Spare {
    /// Buffers kept for the next batch: a batch nearly always goes to one
    /// or two files; more files than this allocate theirs.
    const KEEP: usize = 4;

    fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_default()
    }

    fn give(&mut self, mut buf: Vec<u8>) {
        if self.0.len() < Self::KEEP {
            buf.clear();
            self.0.push(buf);
        }
    }
}

/// One file's share of a batch.
struct File<'a> {
    workspace: &'a str,
    /// The period its traces started in (`started_unix_ms / rotate.millis()`).
    slot: u64,
    lines: Vec<u8>,
    traces: u64,
    newest: u64,
}

/// Appends each line to its workspace's file for the period its trace
/// started in, one write per file per batch, keeping the order of lines
/// within each file.
fn write_batch(store: &mut Store, rotate: Rotation, batch: &mut Vec<Line>, spare: &mut Spare) {
    let mut files: Vec<File<'_>> = Vec::new();
    // A batch's lines nearly all go to one file: a line goes where the
    // one before it went unless its workspace or period differs, and only
    // then is the file looked up (or added).
    let mut index: HashMap<(&str, u64), usize, foldhash::fast::RandomState> = HashMap::default();
    let mut last = usize::MAX;
    for line in batch.iter() {
        let started_unix_ms = line.started_unix_ms();
        let (workspace, slot) = (line.workspace(), started_unix_ms / rotate.millis());
        let same = files
            .get(last)
            .is_some_and(|f| f.slot == slot && f.workspace == workspace);
        if !same {
            last = *index.entry((workspace, slot)).or_insert_with(|| {
                files.push(File {
                    workspace,
                    slot,
                    lines: spare.take(),
                    traces: 0,
                    newest: 0,
                });
                files.len() - 1
            });
        }
        let file = &mut files[last];
        file.newest = file.newest.max(started_unix_ms);
        line.write(&mut file.lines);
        file.lines.push(b'\n');
        file.traces += 1;
    }
    for file in files {
        // The period's name is made once per file, from any of its starts.
        let period = period(file.newest, rotate);
        if let Err(e) = store.append(file.workspace, &period, &file.lines, file.newest) {
            // Log and go on: a full or broken disk loses traces, never
            // the writer or the gateway.
            tracing::warn!(error = %e, workspace = ?file.workspace, traces = file.traces, "trace write failed");
            crate::metrics::trace_dropped("write_error", file.traces);
        }
        spare.give(file.lines);
    }
    batch.clear();
}

/// The writer cannot go on: closes the queue (later traces count as
/// dropped when submitted) and counts those still queued as dropped.
async fn discard(queue: &Queue<Line>) {
    queue.close();
    let mut lost = Vec::new();
    while queue.next_batch(&mut lost, LINGER).await {
        crate::metrics::trace_dropped("write_error", lost.len() as u64);
        lost.clear();
    }
}
