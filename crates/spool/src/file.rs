//! The spill file: JSON lines appended in one write each, taken aside
//! (`.importing`) while they are written back.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where the spill file goes while it is written back.
pub(crate) fn importing(spill: &Path) -> PathBuf {
    let mut p = spill.as_os_str().to_owned();
    p.push(".importing");
    PathBuf::from(p)
}

/// Whether records wait in `spill` (or in its taken copy).
pub(crate) fn exists(spill: &Path) -> bool {
    spill.exists() || importing(spill).exists()
}

/// Appends `records` to the spill file at `path` in one write, through
/// `open` (the file kept open across spills: a full queue spills record
/// by record, and opening the file for each cost four more system calls
/// on the caller's thread). A failed write closes it, to be opened again
/// next time.
pub(crate) fn append<T: Serialize>(
    open: &mut Option<File>,
    path: &Path,
    records: &[T],
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r)?;
        buf.push(b'\n');
    }
    let f = match open {
        Some(f) => f,
        None => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(dir) = dir {
                std::fs::create_dir_all(dir)?;
            }
            let created = !path.exists();
            let mut f = OpenOptions::new().create(true).append(true).open(path)?;
            if created {
                // The file's name on disk too, not only its lines, before
                // the first fsync counts on it.
                if let Some(dir) = dir {
                    let _ = File::open(dir).and_then(|d| d.sync_all());
                }
            } else if cut(path)? {
                // A crash cut the last line: ours starts on a line of its
                // own rather than glued to that one's end.
                f.write_all(b"\n")?;
            }
            open.insert(f)
        }
    };
    // One write: lines of concurrent spills never interleave.
    let written = f.write_all(&buf);
    if written.is_err() {
        *open = None;
    }
    written
}

/// Whether the file at `path` ends inside a line (a write cut by a
/// crash).
fn cut(path: &Path) -> std::io::Result<bool> {
    let mut f = File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}
