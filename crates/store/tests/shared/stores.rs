//! What the tests of the crates whose stores `sluice-store` sets up
//! (`sluice-audit`, `sluice-ledger`) share, included by path:
//!
//! ```ignore
//! #[path = "../../store/tests/shared/stores.rs"]
//! mod stores;
//! ```
//!
//! Tests on the one shared PostgreSQL database keep apart by names no
//! other test uses ([`unique`]).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

/// `what` made unique to this call: the process, a counter and the time.
pub fn unique(what: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{what}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// The test PostgreSQL's URL (`SLUICE_TEST_POSTGRES_URL`), or `None` with
/// a note that the PostgreSQL tests of `what` are skipped.
pub fn postgres_url(what: &str) -> Option<String> {
    let url = std::env::var("SLUICE_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        eprintln!("SLUICE_TEST_POSTGRES_URL unset: PostgreSQL {what} tests skipped");
    }
    url
}

/// A directory of its own under the system's temporary one, removed with
/// everything in it when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A new, empty directory whose name starts with `what`.
    pub fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique(&format!("sluice-{what}-test")));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
