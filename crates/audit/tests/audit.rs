//! The audit store and writer on SQLite and on a real PostgreSQL
//! (`SLUICE_TEST_POSTGRES_URL`; the PostgreSQL tests are skipped, and say
//! so, without it). Tests on the shared PostgreSQL database keep apart by
//! a unique actor each.

use serde_json::json;
use sluice_audit::{AuditLog, AuditStore, Filter, NewEntry};

#[path = "../../store/tests/shared/stores.rs"]
mod stores;

use stores::{TempDir, postgres_url, unique};

async fn postgres() -> Option<AuditStore> {
    let url = postgres_url("audit")?;
    Some(AuditStore::connect(&url).await.expect("PostgreSQL"))
}

fn entry(actor: &str, kind: &str, target: &str, at_ms: i64) -> NewEntry {
    let mut e = NewEntry::now(actor, kind, target)
        .before(json!({"n": at_ms}))
        .after(json!({"n": at_ms + 1}))
        .request(format!("req-{at_ms}"));
    e.at_ms = at_ms;
    e
}

/// Filters by time, actor and kind (a kind selects its sub-kinds),
/// newest first, paged.
async fn filters(store: &AuditStore) {
    let (a, b) = (unique("admin"), unique("key"));
    store
        .insert(&[
            entry(&a, "limit.set", "openai/gpt-4o", 1_000),
            entry(&a, "key.revoke", "sk_1", 2_000),
            entry(&b, "key.rotate", "sk_2", 3_000),
            entry(&a, "keyring.x", "k", 3_500),
            entry(&a, "queue.pause", "default", 4_000),
        ])
        .await
        .unwrap();
    let q = |f: Filter| async move { store.query(&f).await.unwrap() };
    let mine = Filter {
        actor: Some(a.clone()),
        ..Filter::default()
    };
    let all = q(mine.clone()).await;
    let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["queue.pause", "keyring.x", "key.revoke", "limit.set"]
    );
    assert_eq!(all[3].before, Some(json!({"n": 1_000})));
    assert_eq!(all[3].after, Some(json!({"n": 1_001})));
    assert_eq!(all[3].request_id.as_deref(), Some("req-1000"));
    assert_eq!(all[3].target, "openai/gpt-4o");

    let keys = q(Filter {
        kind: Some("key".into()),
        ..mine.clone()
    })
    .await;
    assert_eq!(keys.len(), 1, "key.* but not keyring.*: {keys:?}");
    assert_eq!(keys[0].kind, "key.revoke");

    let window = q(Filter {
        from_ms: Some(2_000),
        to_ms: Some(4_000),
        ..mine.clone()
    })
    .await;
    let at: Vec<i64> = window.iter().map(|e| e.at_ms).collect();
    assert_eq!(at, [3_500, 2_000], "from inclusive, to exclusive");

    let first = q(Filter {
        limit: 2,
        ..mine.clone()
    })
    .await;
    let next = q(Filter {
        limit: 2,
        before_id: Some(first[1].id),
        ..mine
    })
    .await;
    let kinds: Vec<&str> = first.iter().chain(&next).map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["queue.pause", "keyring.x", "key.revoke", "limit.set"]
    );

    let other = q(Filter {
        actor: Some(b),
        ..Filter::default()
    })
    .await;
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].kind, "key.rotate");
}

#[tokio::test]
async fn sqlite_filters_by_time_actor_and_kind() {
    filters(&AuditStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_filters_by_time_actor_and_kind() {
    if let Some(store) = postgres().await {
        filters(&store).await;
    }
}

/// Everything recorded before shutdown is in the store after it, in order.
async fn drains_at_shutdown(store: AuditStore) {
    let actor = unique("drain");
    let (log, task) = AuditLog::spawn(store.clone(), 1_000, None);
    for i in 0..500 {
        // Late enough that the prune test (sharing the database) leaves them.
        log.record(entry(&actor, "job.cancel", &i.to_string(), 1_000_000 + i));
    }
    task.shutdown().await;
    assert_eq!((log.spilled(), log.lost()), (0, 0));
    let got = store
        .query(&Filter {
            actor: Some(actor),
            limit: 1_000,
            ..Filter::default()
        })
        .await
        .unwrap();
    let targets: Vec<String> = got.iter().rev().map(|e| e.target.clone()).collect();
    let want: Vec<String> = (0..500).map(|i: i32| i.to_string()).collect();
    assert_eq!(targets, want);
}

#[tokio::test]
async fn sqlite_drains_at_shutdown() {
    drains_at_shutdown(AuditStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_drains_at_shutdown() {
    if let Some(store) = postgres().await {
        drains_at_shutdown(store).await;
    }
}

/// A full queue spills instead of waiting or dropping: on a
/// current-thread runtime the writer cannot run while the test records,
/// so all but `capacity` entries spill, and all of them reach the store.
async fn a_full_queue_spills_and_nothing_is_lost(store: AuditStore) {
    let dir = TempDir::new("audit");
    let spill = dir.0.join("audit-spill.jsonl");
    let actor = unique("spill");
    let (log, task) = AuditLog::spawn(store.clone(), 10, Some(spill.clone()));
    for i in 0..100 {
        log.record(entry(&actor, "tenant.block", &i.to_string(), i));
    }
    assert_eq!(log.spilled(), 90, "the queue holds 10");
    assert_eq!(log.lost(), 0);
    assert!(spill.exists());
    task.shutdown().await;
    let got = store
        .query(&Filter {
            actor: Some(actor),
            limit: 1_000,
            ..Filter::default()
        })
        .await
        .unwrap();
    let mut targets: Vec<i64> = got.iter().map(|e| e.target.parse().unwrap()).collect();
    targets.sort_unstable();
    assert_eq!(targets, (0..100).collect::<Vec<_>>());
    assert!(!spill.exists(), "the spill file is written out and removed");
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_a_full_queue_spills_and_nothing_is_lost() {
    a_full_queue_spills_and_nothing_is_lost(AuditStore::in_memory().await.unwrap()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn postgres_a_full_queue_spills_and_nothing_is_lost() {
    if let Some(store) = postgres().await {
        a_full_queue_spills_and_nothing_is_lost(store).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_spill_left_by_a_crash_is_written_at_start() {
    let dir = TempDir::new("audit");
    let spill = dir.0.join("audit-spill.jsonl");
    let db = dir.0.join("sluice.db");
    let actor = unique("crash");
    let lines: String = (0..3)
        .map(|i| serde_json::to_string(&entry(&actor, "limit.set", "m", i)).unwrap() + "\n")
        .collect();
    // A line cut by the crash is skipped, not a reason to stop.
    std::fs::write(&spill, lines + "{\"at_ms\":").unwrap();
    let store = AuditStore::open(&db).await.unwrap();
    let (_log, task) = AuditLog::spawn(store.clone(), 10, Some(spill.clone()));
    task.shutdown().await;
    let got = store
        .query(&Filter {
            actor: Some(actor),
            ..Filter::default()
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    assert!(!spill.exists());
    // The file store keeps them across a reopen.
    store.close().await;
    let again = AuditStore::open(&db).await.unwrap();
    assert_eq!(again.query(&Filter::default()).await.unwrap().len(), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_spill_file_an_overflow_is_counted_as_lost() {
    let store = AuditStore::in_memory().await.unwrap();
    let (log, task) = AuditLog::spawn(store, 2, None);
    for i in 0..5 {
        log.record(entry("a", "k", "t", i));
    }
    assert_eq!((log.spilled(), log.lost()), (0, 3));
    task.shutdown().await;
}

/// Retention deletes the entries before the cut, and only them. The
/// times are far in the past so that a shared database's other rows
/// (recorded now, or at 1,000 ms and later by `filters`) are untouched.
async fn prunes_what_is_past_retention(store: &AuditStore) {
    let a = unique("old");
    store
        .insert(&[
            entry(&a, "limit.set", "m", 100),
            entry(&a, "limit.set", "m", 599),
            entry(&a, "limit.set", "m", 600),
            entry(&a, "limit.set", "m", 700),
        ])
        .await
        .unwrap();
    let deleted = store.prune(600).await.unwrap();
    assert!(deleted >= 2, "{deleted}");
    let left: Vec<i64> = store
        .query(&Filter {
            actor: Some(a),
            ..Filter::default()
        })
        .await
        .unwrap()
        .iter()
        .map(|e| e.at_ms)
        .collect();
    assert_eq!(left, [700, 600], "the cut itself is kept");
}

#[tokio::test]
async fn sqlite_prunes_what_is_past_retention() {
    prunes_what_is_past_retention(&AuditStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_prunes_what_is_past_retention() {
    if let Some(store) = postgres().await {
        prunes_what_is_past_retention(&store).await;
    }
}
