//! Request and response bodies in the request log (issue 38): stored
//! with their record in one transaction, once however often a batch is
//! written again, read back only with the record's own tenant, and
//! deleted by their retention (the record stays) or with the record; on
//! SQLite (a file through the direct writer, in memory through sqlx) and
//! PostgreSQL (`SLUICE_TEST_POSTGRES_URL`).

use sluice_ledger::{Bodies, Filter, LedgerStore, Record};

#[path = "../../store/tests/shared/stores.rs"]
mod stores;

use stores::{TempDir, postgres_url, unique};

fn record(tenant: &str, i: i64, at_ms: i64, bodies: Option<Bodies>) -> Record {
    let mut r = Record::new(
        format!("req-{i}"),
        tenant,
        "model",
        "openai",
        "openai/gpt-4o-mini",
        "/v1/chat/completions",
    );
    r.at_ms = at_ms;
    r.status = if bodies.is_some() { 500 } else { 200 };
    r.bodies = bodies;
    r
}

fn bodies(i: i64) -> Bodies {
    Bodies::capture(
        format!(r#"{{"model":"m","api_key":"sk-secret-{i}-abcdefghijkl","n":{i}}}"#).as_bytes(),
        b"{\"error\":{\"message\":\"boom\"}}",
        29,
        1_024,
    )
}

async fn bodies_are_kept_with_their_record(store: &LedgerStore) {
    let t = unique("bodies");
    let other = unique("other");
    let now = sluice_ledger::now_ms();
    // Early in 1970: older than any other test's records in a shared
    // database, so that the purges below delete only this test's.
    let old = 5_000;
    // 40 records: every third with bodies; two of those old (past a
    // retention). More than one INSERT's worth.
    let batch: Vec<Record> = (0..40)
        .map(|i| {
            let at = if i < 6 { old } else { now };
            record(&t, i, at, (i % 3 == 0).then(|| bodies(i)))
        })
        .collect();
    assert_eq!(store.insert(&batch).await.unwrap(), 40);
    // Written again (a spill replayed): nothing new, no error.
    assert_eq!(store.insert(&batch).await.unwrap(), 0);
    assert_eq!(
        store
            .insert(&[record(&other, 99, now, Some(bodies(99)))])
            .await
            .unwrap(),
        1
    );
    let all = Filter {
        tenant: Some(t.clone()),
        limit: 1_000,
        ..Filter::default()
    };
    let listed = store.find(&all).await.unwrap();
    assert_eq!(listed.len(), 40);
    assert!(
        listed.iter().all(|(_, r)| r.bodies.is_none()),
        "a page of the log carries no bodies"
    );
    let id_of = |n: &str| listed.iter().find(|(_, r)| r.request_id == n).unwrap().0;
    let (id, got) = store.get(id_of("req-9"), Some(&t)).await.unwrap().unwrap();
    assert_eq!(id, id_of("req-9"));
    let b = got.bodies.expect("its bodies");
    assert_eq!(b, bodies(9));
    assert!(!b.request.contains("sk-secret"), "{}", b.request);
    assert!(b.request.contains("[redacted]"));
    assert_eq!(b.response_bytes, 29);
    // A record without bodies reads without them.
    let (_, plain) = store.get(id_of("req-10"), Some(&t)).await.unwrap().unwrap();
    assert!(plain.bodies.is_none());
    // Another tenant's id is not found under this tenant, nor an id
    // that does not exist; the operator (no tenant) finds it.
    let theirs = store
        .find(&Filter {
            tenant: Some(other.clone()),
            ..Filter::default()
        })
        .await
        .unwrap()[0]
        .0;
    assert!(store.get(theirs, Some(&t)).await.unwrap().is_none());
    assert!(store.get(i64::MAX, None).await.unwrap().is_none());
    assert!(store.get(theirs, None).await.unwrap().is_some());
    // The bodies' retention deletes old bodies only; the records stay.
    let cut = old + 1;
    assert!(store.purge_bodies(cut).await.unwrap() >= 2);
    let (_, old3) = store.get(id_of("req-3"), Some(&t)).await.unwrap().unwrap();
    assert!(old3.bodies.is_none(), "past the bodies' retention");
    assert_eq!(store.find(&all).await.unwrap().len(), 40);
    assert!(
        store
            .get(id_of("req-9"), Some(&t))
            .await
            .unwrap()
            .unwrap()
            .1
            .bodies
            .is_some()
    );
    // The records' retention takes their bodies with them: the old
    // records are deleted, and no body is left of them.
    let (_, young) = store.get(id_of("req-6"), Some(&t)).await.unwrap().unwrap();
    assert!(young.bodies.is_some());
    let late = record(&t, 77, old, Some(bodies(77)));
    assert_eq!(store.insert(&[late]).await.unwrap(), 1);
    store.purge(cut, &[]).await.unwrap();
    assert_eq!(store.find(&all).await.unwrap().len(), 34);
    assert!(store.get(id_of("req-0"), Some(&t)).await.unwrap().is_none());
    assert_eq!(store.purge_bodies(cut).await.unwrap(), 0, "none left");
}

#[tokio::test]
async fn sqlite_file_bodies_are_kept_with_their_record() {
    let dir = TempDir::new("ledger-bodies");
    let store = LedgerStore::open(dir.0.join("ledger.db")).await.unwrap();
    bodies_are_kept_with_their_record(&store).await;
    store.close().await;
}

#[tokio::test]
async fn sqlite_bodies_are_kept_with_their_record() {
    bodies_are_kept_with_their_record(&LedgerStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_bodies_are_kept_with_their_record() {
    if let Some(url) = postgres_url("ledger bodies") {
        let store = LedgerStore::connect(&url).await.unwrap();
        bodies_are_kept_with_their_record(&store).await;
    }
}

/// A record spilled with its bodies reads back with them (the spill
/// file is JSON lines), and one of an older version without them.
#[test]
fn bodies_survive_the_spill_file() {
    let r = record("spill", 1, 1, Some(bodies(1)));
    let line = serde_json::to_string(&r).unwrap();
    let read: Record = serde_json::from_str(&line).unwrap();
    assert_eq!(read, r);
    let plain = record("spill", 2, 1, None);
    let line = serde_json::to_string(&plain).unwrap();
    assert!(!line.contains("bodies"));
}
