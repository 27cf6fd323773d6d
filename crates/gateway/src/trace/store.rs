//! The trace files on disk: which file a line goes to, when a file is
//! full, and which files go when the directory holds too much.
//!
//! Every file the writer may count is known here (found at start, then
//! kept up to date as files are made and removed), oldest first, so the
//! caps are kept without listing the directory again.
//!
//! Plain blocking `std::fs`: the writer calls it on a blocking thread
//! once per batch, rather than paying a hop to the blocking pool for
//! every file operation (a stream of fresh workspaces is a create, a
//! write, an unlink and an rmdir each).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use std::fs::{File, OpenOptions};
use std::io::Write as _;

use super::path::{Rotation, file_component, parse_segment, segment_name};

/// What the trace directory may hold, and how it is cut into files
/// (`[trace]`'s `rotate`, `max_file_bytes`, `max_total_bytes`,
/// `max_files`, `max_age_hours`, `max_open_files`; defaults in
/// [`TraceConfig`](crate::config::TraceConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A new file per workspace per UTC day or hour.
    pub rotate: Rotation,
    /// A file that has reached this starts the period's next segment. A
    /// single trace longer than this gets a file of its own.
    pub max_file_bytes: u64,
    /// Past this, the oldest files are removed.
    pub max_total_bytes: u64,
    /// Past this many files, the oldest are removed.
    pub max_files: usize,
    /// Files whose newest trace started longer ago than this (before the
    /// newest trace written) are removed; `None`: no age limit.
    pub max_age: Option<Duration>,
    /// Files kept open between writes; the least recently used is closed
    /// when another is needed.
    pub max_open_files: usize,
}

/// A file the store counts.
#[derive(Debug)]
struct Stored {
    path: PathBuf,
    bytes: u64,
    /// When the newest trace in it started (ms since the Unix epoch);
    /// for a file found at start, when it was last modified.
    newest_ms: u64,
    /// `(workspace component, period, segment)` for files of the writer's
    /// own shape, which it may append to.
    segment: Option<(String, String, u32)>,
}

/// The files under the trace directory and the handles open on them.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    retention: Retention,
    /// Oldest first: the key is the order in which files were made (those
    /// found at start by modification time).
    files: BTreeMap<u64, Stored>,
    /// The newest segment of each (workspace, period) that has a file.
    latest: HashMap<(String, String), u64>,
    total_bytes: u64,
    next: u64,
    open: OpenFiles,
    /// The start of the newest trace written: the store's "now", so that
    /// it never reads a clock of its own.
    now_ms: u64,
    /// `now_ms` when files were last aged: at most once a minute.
    aged_at_ms: u64,
}

/// How far `now_ms` moves before files are aged again.
const AGE_EVERY_MS: u64 = 60_000;

impl Store {
    /// Counts the `*.jsonl` files one level below each directory in `dir`
    /// (the writer's own and any other trace files there, such as those
    /// of earlier layouts), then removes the oldest beyond the caps.
    pub(crate) fn open(dir: PathBuf, retention: Retention) -> Store {
        let mut store = Store {
            open: OpenFiles::new(retention.max_open_files),
            dir,
            retention,
            files: BTreeMap::new(),
            latest: HashMap::new(),
            total_bytes: 0,
            next: 0,
            now_ms: 0,
            aged_at_ms: 0,
        };
        let mut found = scan(&store.dir);
        found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        for (modified, path, bytes) in found {
            let segment = segment_of(&path);
            let id = store.insert(path, bytes, segment);
            if let Some(f) = store.files.get_mut(&id) {
                f.newest_ms = unix_ms(modified);
            }
        }
        store.enforce();
        store
    }

    /// Appends `lines` (whole JSON lines, of traces of `workspace` that
    /// started in `period`, the newest at `newest_ms`) to the period's
    /// newest segment, going on in a new one where they would pass
    /// `max_file_bytes`; then removes the oldest files beyond the caps,
    /// and those past `max_age`.
    ///
    /// # Errors
    /// Making the directory, opening or writing a file failed; the lines
    /// not yet written are lost.
    pub(crate) fn append(
        &mut self,
        workspace: &str,
        period: &str,
        mut lines: &[u8],
        newest_ms: u64,
    ) -> std::io::Result<()> {
        self.now_ms = self.now_ms.max(newest_ms);
        let key = (file_component(workspace), period.to_owned());
        while !lines.is_empty() {
            let max = self.retention.max_file_bytes;
            let first = memchr::memchr(b'\n', lines).map_or(lines.len(), |i| i + 1) as u64;
            let current = self.latest.get(&key).and_then(|&id| {
                let f = self.files.get(&id)?;
                let (_, _, n) = f.segment.as_ref()?;
                Some((id, *n, f.bytes))
            });
            let (id, bytes) = match current {
                Some((id, _, bytes)) if bytes == 0 || bytes + first <= max => (id, bytes),
                Some((full, n, _)) => {
                    // No more appends to the full segment: its handle goes
                    // now rather than when the cache needs room.
                    if let Some(path) = self.files.get(&full).map(|f| f.path.clone()) {
                        self.open.close(&path);
                    }
                    (self.new_segment(&key, n + 1), 0)
                }
                None => (self.new_segment(&key, 0), 0),
            };
            // Whole lines up to the room left, and at least one: a trace
            // longer than a file gets a file of its own.
            let room = max.saturating_sub(bytes);
            let cut = fit(lines, room).unwrap_or(first) as usize;
            let (chunk, rest) = lines.split_at(cut);
            lines = rest;
            self.write(id, chunk, newest_ms)?;
        }
        Ok(())
    }

    /// Appends `chunk` to file `id`, then keeps the caps.
    fn write(&mut self, id: u64, chunk: &[u8], newest_ms: u64) -> std::io::Result<()> {
        let Some(path) = self.files.get(&id).map(|f| f.path.clone()) else {
            unreachable!("found or counted by the caller");
        };
        let written = self.open.append(&path, chunk);
        match &written {
            Ok(opened) => {
                if let Some(f) = self.files.get_mut(&id) {
                    // A file opened by this write is measured from the
                    // disk, so the count follows what is really there.
                    let before = f.bytes;
                    f.bytes = opened.unwrap_or(before) + chunk.len() as u64;
                    f.newest_ms = f.newest_ms.max(newest_ms);
                    self.total_bytes = self.total_bytes - before + f.bytes;
                }
            }
            Err(_) => {
                // A file never made (its directory could not be, say) is
                // not counted against the caps.
                if self.files.get(&id).is_some_and(|f| f.bytes == 0) {
                    self.forget(id);
                }
            }
        }
        self.enforce();
        written.map(drop)
    }

    fn new_segment(&mut self, key: &(String, String), n: u32) -> u64 {
        let path = self.dir.join(&key.0).join(segment_name(&key.1, n));
        self.insert(path, 0, Some((key.0.clone(), key.1.clone(), n)))
    }

    /// Writes the open files through to the disk.
    pub(crate) fn sync_all(&mut self) {
        self.open.sync_all();
    }

    fn insert(&mut self, path: PathBuf, bytes: u64, segment: Option<(String, String, u32)>) -> u64 {
        let id = self.next;
        self.next += 1;
        if let Some((ws, period, n)) = &segment {
            let key = (ws.clone(), period.clone());
            let newer = self
                .latest
                .get(&key)
                .and_then(|i| self.files.get(i))
                .and_then(|f| f.segment.as_ref())
                .is_some_and(|(_, _, m)| m >= n);
            if !newer {
                self.latest.insert(key, id);
            }
        }
        self.total_bytes += bytes;
        self.files.insert(
            id,
            Stored {
                path,
                bytes,
                newest_ms: 0,
                segment,
            },
        );
        id
    }

    /// Removes the files past `max_age`, then the oldest files until both
    /// caps hold.
    fn enforce(&mut self) {
        let r = self.retention;
        if let Some(age) = r.max_age
            && self.now_ms >= self.aged_at_ms.saturating_add(AGE_EVERY_MS)
        {
            self.aged_at_ms = self.now_ms;
            let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            let cutoff = self.now_ms.saturating_sub(age);
            let expired: Vec<u64> = self
                .files
                .iter()
                .filter(|(_, f)| f.newest_ms < cutoff)
                .map(|(&id, _)| id)
                .collect();
            for id in expired {
                self.remove(id);
            }
        }
        while self.files.len() > r.max_files || self.total_bytes > r.max_total_bytes {
            let Some(&id) = self.files.keys().next() else {
                break;
            };
            if !self.remove(id) {
                break;
            }
        }
        crate::metrics::trace_disk(self.total_bytes, self.files.len());
    }

    /// Removes file `id` from the disk and the count; `false` if it was
    /// not counted.
    fn remove(&mut self, id: u64) -> bool {
        {
            let Some(f) = self.forget(id) else {
                return false;
            };
            self.open.close(&f.path);
            match std::fs::remove_file(&f.path) {
                Ok(()) => crate::metrics::trace_file_removed(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Forgotten anyway: a file that cannot be removed must
                    // not stop the writer, nor be tried on every write.
                    tracing::warn!(error = %e, path = %f.path.display(), "trace file not removed");
                }
            }
            if let Some(parent) = f.path.parent().filter(|p| *p != self.dir) {
                // Fails, as it should, while the workspace has other files.
                let _ = std::fs::remove_dir(parent);
            }
        }
        true
    }

    /// Stops counting file `id`.
    fn forget(&mut self, id: u64) -> Option<Stored> {
        let f = self.files.remove(&id)?;
        self.total_bytes -= f.bytes;
        if let Some((ws, period, _)) = &f.segment {
            let key = (ws.clone(), period.clone());
            if self.latest.get(&key) == Some(&id) {
                self.latest.remove(&key);
            }
        }
        Some(f)
    }
}

/// The length of the longest run of whole lines at the start of `lines`
/// that is at most `room` bytes; `None` if not even the first fits. It
/// ends at the last newline within `room`, searched from the end: a batch
/// that fits (the common case) ends with one, found at once.
fn fit(lines: &[u8], room: u64) -> Option<u64> {
    let within = usize::try_from(room).map_or(lines.len(), |room| room.min(lines.len()));
    memchr::memrchr(b'\n', &lines[..within]).map(|i| i as u64 + 1)
}

fn segment_of(path: &Path) -> Option<(String, String, u32)> {
    let ws = path.parent()?.file_name()?.to_str()?;
    let (period, n) = parse_segment(path.file_name()?.to_str()?)?;
    Some((ws.to_owned(), period.to_owned(), n))
}

/// Milliseconds since the Unix epoch (0 before it).
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `(modified, path, bytes)` of every `*.jsonl` file one level below a
/// directory in `dir`. Unreadable entries are skipped: the directory may
/// not exist yet, and a stray entry must not stop the writer.
fn scan(dir: &Path) -> Vec<(SystemTime, PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(top) = std::fs::read_dir(dir) else {
        return out;
    };
    for ws in top.flatten() {
        if !ws.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(inner) = std::fs::read_dir(ws.path()) else {
            continue;
        };
        for entry in inner.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_file() {
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((modified, path, meta.len()));
            }
        }
    }
    out
}

/// A bounded cache of files open for appending.
#[derive(Debug)]
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

    /// Appends `bytes` to `path`, opening it (and its directory) if need
    /// be. Returns the file's length before the write when it was opened
    /// by this call.
    fn append(&mut self, path: &Path, bytes: &[u8]) -> std::io::Result<Option<u64>> {
        self.tick += 1;
        let mut opened = None;
        if !self.open.contains_key(path) {
            let file = open_append(path)?;
            opened = Some(file.metadata()?.len());
            if self.open.len() >= self.max {
                self.evict();
            }
            self.open.insert(path.to_owned(), (file, self.tick));
        }
        let Some((file, used)) = self.open.get_mut(path) else {
            unreachable!("inserted above");
        };
        *used = self.tick;
        // Unbuffered: once `write_all` returns, the bytes are the OS's.
        let written = file.write_all(bytes);
        if written.is_err() {
            // Reopen next time: the file may have been removed or rotated.
            self.open.remove(path);
        }
        written.map(|()| opened)
    }

    /// Closes `path` if it is open.
    fn close(&mut self, path: &Path) {
        self.open.remove(path);
    }

    /// Closes the least recently used file. Its data has reached the OS
    /// (it survives a crash of the process, not of the machine); only the
    /// files open at shutdown are fsynced.
    fn evict(&mut self) {
        let oldest = self
            .open
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(p, _)| p.clone());
        if let Some(p) = oldest {
            self.close(&p);
        }
    }

    fn sync_all(&mut self) {
        for (path, (file, _)) in &mut self.open {
            if let Err(e) = file.sync_data() {
                tracing::warn!(error = %e, path = %path.display(), "trace fsync failed");
            }
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::fit;

    /// `fit` by its definition: the end of the last whole line that
    /// starts the input and ends within `room`.
    fn naive(lines: &[u8], room: u64) -> Option<u64> {
        let mut end = None;
        for (i, &b) in lines.iter().enumerate() {
            if i as u64 >= room {
                break;
            }
            if b == b'\n' {
                end = Some(i as u64 + 1);
            }
        }
        end
    }

    proptest::proptest! {
        #[test]
        fn fit_is_the_last_newline_within_room(
            lines in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(b'\n'), proptest::strategy::Just(b'x')], 0..80),
            room in proptest::prop_oneof![0u64..100, proptest::strategy::Just(u64::MAX)],
        ) {
            proptest::prop_assert_eq!(fit(&lines, room), naive(&lines, room));
        }
    }
}
