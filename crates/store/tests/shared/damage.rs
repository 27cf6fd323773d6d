//! Damaging a SQLite store on purpose, for the tests of what a store does
//! with a damaged file (`sluice-jobs`'s and the `sluice` binary's),
//! included by path:
//!
//! ```ignore
//! #[path = "../../store/tests/shared/damage.rs"]
//! mod damage;
//! ```

use std::path::Path;

use sqlx::Connection;

/// Overwrites the root page of `index` in the SQLite file at `path` with
/// bytes that are no b-tree page, as a bad sector or a stray write would.
pub async fn damage_index(path: &Path, index: &str) {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let (root,): (i64,) = sqlx::query_as("SELECT rootpage FROM sqlite_master WHERE name = ?")
        .bind(index)
        .fetch_one(&mut c)
        .await
        .unwrap();
    let (size,): (i64,) = sqlx::query_as("PRAGMA page_size")
        .fetch_one(&mut c)
        .await
        .unwrap();
    // Closing the last connection checkpoints the WAL into the file.
    c.close().await.unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let at = usize::try_from((root - 1) * size).unwrap();
    let size = usize::try_from(size).unwrap();
    assert!(bytes.len() >= at + size, "the index's page is in the file");
    bytes[at..at + size].fill(0xff);
    std::fs::write(path, bytes).unwrap();
}
