//! Writing the spill file back into the sink, a batch at a time, with a
//! durable cursor.
//!
//! The file is taken aside (`.importing`) so that later spills start a
//! fresh one, then read from where the cursor (`.importing.cursor`, the
//! byte offset after the last batch the sink took) says, a batch at a
//! time: memory holds one batch, not the file. After each batch the sink
//! took, the cursor moves past it (written aside and renamed over, so it
//! is always one whole number). A crash, or a batch the sink refuses,
//! leaves the file and the cursor: the next try starts at the first batch
//! not taken. Only the batch whose write and cursor a crash separated is
//! written again; sinks whose writes are idempotent (the usage ledger's,
//! keyed by each record's key) store it once.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde::de::DeserializeOwned;

use crate::{Inner, Sink, file};

/// The cursor of the file taken aside at `taken`.
pub(crate) fn cursor(taken: &Path) -> PathBuf {
    let mut p = taken.as_os_str().to_owned();
    p.push(".cursor");
    PathBuf::from(p)
}

/// The offset the cursor at `path` holds (0 without one, or with one
/// that is not a number: the file is then read from its start again).
fn read_cursor(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Moves the cursor at `path` to `offset`: written aside, then renamed
/// over the old one, so that a crash leaves one or the other whole.
fn write_cursor(path: &Path, offset: u64) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, offset.to_string())?;
    std::fs::rename(&tmp, path)
}

/// Up to `max` records from `reader`, and the bytes they took; a line
/// that is not a record (a write cut by a crash) is logged and skipped.
fn next_batch<T: DeserializeOwned>(
    reader: &mut BufReader<File>,
    max: usize,
    name: &str,
    into: &mut Vec<T>,
) -> std::io::Result<u64> {
    let mut read = 0;
    let mut line = String::new();
    while into.len() < max {
        line.clear();
        let n = reader.read_line(&mut line)?;
        if n == 0 {
            break;
        }
        read += n as u64;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str(text) {
            Ok(r) => into.push(r),
            Err(e) => {
                tracing::error!(spool = name, error = %e, line = %text, "spill line unreadable")
            }
        }
    }
    Ok(read)
}

impl<T> Inner<T>
where
    T: DeserializeOwned + Send + Sync,
{
    /// Writes the spill file into `sink`, from its cursor on; on failure
    /// the rest stays for the next try. A file spilled meanwhile (a
    /// stall, a full queue) is written in turn.
    pub(crate) async fn import<S: Sink<T>>(&self, sink: &S) {
        let shared = &self.shared;
        let Some(spill) = &shared.spill else {
            return;
        };
        // Two files at most: one a crash or a failure left taken aside,
        // then the one spilled since. A writer that kept finding new ones
        // (a full queue spilling all the while) would never take a batch
        // from its queue again; the next good batch comes back here.
        for _ in 0..2 {
            if !shared.pending.swap(false, Ordering::AcqRel) {
                return;
            }
            if !self.import_once(sink, spill).await {
                shared.pending.store(true, Ordering::Release);
                return;
            }
        }
    }

    /// One file: `false` when it could not all be written.
    async fn import_once<S: Sink<T>>(&self, sink: &S, spill: &Path) -> bool {
        let shared = &self.shared;
        let taken = file::importing(spill);
        let cursor = cursor(&taken);
        if let Some(f) = shared.file_handle() {
            // On disk before it is read back and removed (what a caller
            // appends meanwhile is in the file taken, read below).
            shared.sync_file(&f);
        }
        {
            // Records spilled from now on go to a fresh file.
            let mut open = shared.file.lock().unwrap_or_else(|e| e.into_inner());
            // Closed: the next spill opens (creates) the file at `spill`
            // again instead of appending to the one taken.
            *open = None;
            if !taken.exists() {
                // A cursor without its file belongs to no file: the one
                // taken now starts at its beginning.
                let _ = std::fs::remove_file(&cursor);
                if let Err(e) = std::fs::rename(spill, &taken) {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        return true;
                    }
                    tracing::warn!(spool = shared.name, error = %e, "spill file not taken");
                    return false;
                }
            } else if spill.exists() {
                // The file taken is older (a write-back a crash or a
                // failure cut short); the newer one comes next.
                shared.pending.store(true, Ordering::Release);
            }
        }
        let mut offset = read_cursor(&cursor);
        let mut reader = match File::open(&taken).and_then(|mut f| {
            f.seek(SeekFrom::Start(offset))?;
            Ok(BufReader::new(f))
        }) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(e) => {
                tracing::warn!(spool = shared.name, error = %e, "spill file unreadable");
                return false;
            }
        };
        let (from, mut records) = (offset, 0u64);
        let mut batch = Vec::with_capacity(shared.batch);
        loop {
            batch.clear();
            let read = match next_batch(&mut reader, shared.batch, shared.name, &mut batch) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(spool = shared.name, error = %e, "spill file unreadable");
                    return false;
                }
            };
            if read == 0 {
                break;
            }
            if !batch.is_empty() {
                self.begin_write(None);
                let written = sink.write(&batch).await;
                self.end_write();
                if let Err(e) = written {
                    tracing::warn!(spool = shared.name, error = %e, "spill not written yet");
                    return false;
                }
                shared
                    .written
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                records += batch.len() as u64;
            }
            offset += read;
            if let Err(e) = write_cursor(&cursor, offset) {
                // The batch would be written again after a crash: only
                // idempotent sinks store it once.
                tracing::warn!(spool = shared.name, error = %e, "spill cursor not written");
            }
        }
        // The cursor first: a crash between the two leaves the file to be
        // read again from its start (its records written again), never a
        // cursor that would skip part of the next file taken.
        let _ = std::fs::remove_file(&cursor);
        if let Err(e) = std::fs::remove_file(&taken) {
            tracing::warn!(spool = shared.name, error = %e, "spill file not removed");
        }
        tracing::info!(
            spool = shared.name,
            records,
            resumed_at_byte = from,
            "spill written to the store"
        );
        true
    }
}
