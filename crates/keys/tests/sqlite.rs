//! The store suite on SQLite, in memory and in a file.

mod suite;

use sluice_keys::{KeyCache, KeyStore, ManualClock, NewKey, NewTenant};
use suite::store_tests;

struct Memory;

impl suite::Factory for Memory {
    async fn make(&self, clock: ManualClock) -> KeyStore {
        KeyStore::in_memory().await.unwrap().with_clock(clock)
    }
}

mod memory {
    use super::*;
    store_tests!(Memory);
}

/// A file per store, under the target directory's temporary space.
struct File;

fn temp_path(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sluice-keys-test-{}-{}-{tag}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("keys.db")
}

impl suite::Factory for File {
    async fn make(&self, clock: ManualClock) -> KeyStore {
        KeyStore::open(temp_path("suite"))
            .await
            .unwrap()
            .with_clock(clock)
    }
}

mod file {
    use super::*;
    store_tests!(File);
}

#[tokio::test]
async fn a_reopened_file_keeps_its_keys() {
    let path = temp_path("reopen");
    let s = KeyStore::open(&path).await.unwrap();
    s.create_tenant(&NewTenant {
        name: "acme".into(),
        ..NewTenant::default()
    })
    .await
    .unwrap();
    let k = s
        .issue_key(&NewKey {
            tenant: "acme".into(),
            ..NewKey::default()
        })
        .await
        .unwrap();
    s.close().await;
    // The file holds the hash, never the key.
    let bytes = std::fs::read(&path).unwrap();
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
    let secret = k.key.rsplit('_').next().unwrap().as_bytes();
    assert!(!bytes.windows(secret.len()).any(|w| w == secret));
    assert!(!wal.windows(secret.len()).any(|w| w == secret));

    let s = KeyStore::open(&path).await.unwrap();
    let caller = KeyCache::new(s).authenticate(&k.key).await.unwrap();
    assert_eq!(&*caller.tenant, "acme");
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}
