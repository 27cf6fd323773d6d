//! The spill file: JSON lines appended in one write each, taken aside
//! (`.importing`) while they are written back.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

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
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            open.insert(OpenOptions::new().create(true).append(true).open(path)?)
        }
    };
    // One write: lines of concurrent spills never interleave.
    let written = f.write_all(&buf);
    if written.is_err() {
        *open = None;
    }
    written
}

/// The records of a spill file; a line that is not one (a write cut by a
/// crash) is logged and skipped.
pub(crate) fn read<T: DeserializeOwned>(path: &Path, name: &str) -> std::io::Result<Vec<T>> {
    let mut out = Vec::new();
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(spool = name, error = %e, %line, "spill line unreadable"),
        }
    }
    Ok(out)
}
