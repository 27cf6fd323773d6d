//! The ledger store and writer on SQLite and on a real PostgreSQL
//! (`SLUICE_TEST_POSTGRES_URL`; the PostgreSQL tests are skipped, and say
//! so, without it). Tests on the shared PostgreSQL database keep apart by
//! a unique tenant each.

use sluice_ledger::{Dim, Granularity, Ledger, LedgerStore, Query, Record, Row, Spent};
use sluice_spool::SpoolConfig;

#[path = "../../store/tests/shared/stores.rs"]
mod stores;

use stores::{TempDir, postgres_url, unique};

/// A store in a SQLite file of `dir`: its batches are written on the
/// calling thread (the store's direct writer), not through sqlx.
async fn sqlite_file(dir: &TempDir) -> LedgerStore {
    LedgerStore::open(dir.0.join("ledger.db"))
        .await
        .expect("SQLite file")
}

async fn postgres() -> Option<LedgerStore> {
    let url = postgres_url("ledger")?;
    Some(LedgerStore::connect(&url).await.expect("PostgreSQL"))
}

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// The start of the day before yesterday (UTC): recent enough for every
/// gateway's retention on the shared PostgreSQL, and a purge before the
/// next day removes nothing another test is reading.
fn base() -> i64 {
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    Granularity::Day.bucket(now) - 2 * DAY
}

/// A record of `tenant` at `at_ms`: `n` drives every figure, so sums are
/// checkable.
fn record(tenant: &str, at_ms: i64, model: &str, feature: Option<&str>, n: u64) -> Record {
    let mut r = Record::new(
        format!("req-{n}"),
        tenant,
        "model",
        "openai",
        model,
        "/v1/chat/completions",
    );
    r.at_ms = at_ms;
    r.key_id = Some("k1".into());
    r.user = Some("u\u{e9}".into());
    r.feature = feature.map(str::to_owned);
    r.status = if n.is_multiple_of(5) { 500 } else { 200 };
    r.prompt_tokens = 100 + n;
    r.completion_tokens = 10 + n;
    r.cached_tokens = n % 3;
    r.reasoning_tokens = n % 7;
    r.estimated = n.is_multiple_of(2);
    r.cost_nanos = 1_000_003 * n;
    r.latency_ms = n;
    r.queue_ms = n / 2;
    r.retries = u32::try_from(n % 3).unwrap();
    r.cache_hit = n.is_multiple_of(4);
    r.unpriced = n % 6 == 1;
    r
}

fn sums(rows: &[Row]) -> (u64, u64, u64, u64, u64, u64, u64) {
    rows.iter().fold((0, 0, 0, 0, 0, 0, 0), |a, r| {
        (
            a.0 + r.requests,
            a.1 + r.errors,
            a.2 + r.prompt_tokens,
            a.3 + r.completion_tokens,
            a.4 + r.cached_tokens,
            a.5 + r.reasoning_tokens,
            a.6 + r.cost_nanos,
        )
    })
}

/// Records read back whole; rollups at every granularity sum to the raw
/// totals; grouping, ranges and the tenant filter select what they say.
async fn rollups_match_the_records(store: &LedgerStore) {
    let (t, other) = (unique("acme"), unique("globex"));
    let base = base();
    let mut records = Vec::new();
    for n in 0..300u64 {
        let at = base + i64::try_from(n).unwrap() * 7 * 60_000; // every 7 minutes
        let model = if n % 2 == 0 {
            "openai/gpt-4o"
        } else {
            "openai/gpt-4o-mini"
        };
        let feature = (n % 3 == 0).then_some("search");
        records.push(record(&t, at, model, feature, n));
    }
    records.push(record(&other, base, "openai/gpt-4o", None, 1));
    for chunk in records.chunks(64) {
        store.insert(chunk).await.unwrap();
    }
    let mine = &records[..300];
    let end = base + 3 * DAY;

    let read = store.records(&t, 0, 1_000).await.unwrap();
    assert_eq!(read.len(), 300);
    assert_eq!(read[17].1, mine[17], "a record reads back whole");
    // Every one, in order: batches of 64 and a last of 45 go in as
    // multi-row INSERTs and one by one (direct.rs).
    assert!(
        read.iter().map(|(_, r)| r).eq(mine.iter()),
        "every record reads back whole, in order"
    );

    let totals = store.totals(0, i64::MAX, Some(&t)).await.unwrap();
    assert_eq!(totals.records, 300);
    assert_eq!(totals.unpriced, 50, "one record in six is unpriced");
    assert_eq!(
        totals.prompt_tokens,
        mine.iter().map(|r| r.prompt_tokens).sum::<u64>()
    );
    assert_eq!(
        totals.cost_nanos,
        mine.iter().map(|r| r.cost_nanos).sum::<u64>()
    );
    let expect = (
        300,
        mine.iter().filter(|r| r.is_error()).count() as u64,
        totals.prompt_tokens,
        totals.completion_tokens,
        totals.cached_tokens,
        totals.reasoning_tokens,
        totals.cost_nanos,
    );
    for g in [
        Granularity::Minute,
        Granularity::Hour,
        Granularity::Day,
        Granularity::Total,
    ] {
        let rows = store
            .usage(&Query::new(base, end, g).tenant(t.clone()))
            .await
            .unwrap();
        assert_eq!(sums(&rows), expect, "{g}");
        // Unpriced calls are counted, not folded into a cost of 0.
        assert_eq!(
            rows.iter().map(|r| r.unpriced).sum::<u64>(),
            mine.iter().filter(|r| r.unpriced).count() as u64,
            "{g}"
        );
        if g == Granularity::Day {
            // 300 × 7 minutes = 35 hours: two days.
            let buckets: Vec<i64> = rows.iter().map(|r| r.bucket_ms.unwrap()).collect();
            assert_eq!(buckets, [base, base + DAY]);
        }
    }
    // Grouped by model and feature: four groups, each its own sums.
    let q = Query::new(base, end, Granularity::Total)
        .tenant(t.clone())
        .group_by([Dim::Feature, Dim::Model]);
    let rows = store.usage(&q).await.unwrap();
    assert_eq!(rows.len(), 4);
    let search_4o = rows
        .iter()
        .find(|r| {
            r.model.as_deref() == Some("openai/gpt-4o") && r.feature.as_deref() == Some("search")
        })
        .unwrap();
    let want: Vec<&Record> = mine
        .iter()
        .filter(|r| r.model == "openai/gpt-4o" && r.feature.as_deref() == Some("search"))
        .collect();
    assert_eq!(search_4o.requests, want.len() as u64);
    assert_eq!(
        search_4o.cost_nanos,
        want.iter().map(|r| r.cost_nanos).sum::<u64>()
    );
    assert!(
        rows.iter()
            .all(|r| r.tenant.is_none() && r.bucket_ms.is_none())
    );
    // A range of the second day only.
    let day2 = store
        .usage(&Query::new(base + DAY, end, Granularity::Total).tenant(t.clone()))
        .await
        .unwrap();
    let in_day2 = mine.iter().filter(|r| r.at_ms >= base + DAY).count() as u64;
    assert_eq!(day2[0].requests, in_day2);
    // Grouped by tenant without the filter: the other tenant is there too.
    let both = store
        .usage(&Query::new(base, base + 60_000, Granularity::Total).group_by([Dim::Tenant]))
        .await
        .unwrap();
    assert!(
        both.iter()
            .any(|r| r.tenant.as_deref() == Some(other.as_str()))
    );
    assert!(both.iter().any(|r| r.tenant.as_deref() == Some(t.as_str())));

    // Retention: records and minute rollups before the second day go.
    store
        .purge(base + DAY, &[(Granularity::Minute, base + DAY)])
        .await
        .unwrap();
    let left = store.totals(0, i64::MAX, Some(&t)).await.unwrap();
    assert_eq!(left.records, in_day2);
    let minutes = store
        .usage(&Query::new(0, end, Granularity::Minute).tenant(t.clone()))
        .await
        .unwrap();
    assert_eq!(sums(&minutes).0, in_day2);
    let days = store
        .usage(&Query::new(0, end, Granularity::Day).tenant(t.clone()))
        .await
        .unwrap();
    assert_eq!(sums(&days).0, 300, "day rollups outlive the records");
}

#[tokio::test]
async fn sqlite_rollups_match_the_records() {
    rollups_match_the_records(&LedgerStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn sqlite_file_rollups_match_the_records() {
    let dir = TempDir::new("ledger-file");
    rollups_match_the_records(&sqlite_file(&dir).await).await;
}

#[tokio::test]
async fn postgres_rollups_match_the_records() {
    if let Some(store) = postgres().await {
        rollups_match_the_records(&store).await;
    }
}

/// Through the writer: a queue far smaller than the burst spills, and
/// every record arrives once, in the records and in the rollups.
async fn the_writer_loses_nothing(store: LedgerStore) {
    let t = unique("burst");
    let dir = TempDir::new("ledger");
    let spill = dir.0.join("ledger-spill.jsonl");
    let config = SpoolConfig::new("ledger")
        .capacity(50)
        .spill(Some(spill.clone()));
    let (ledger, task): (Ledger, _) = Ledger::spawn(store.clone(), config);
    for n in 0..2_000 {
        ledger.push(record(
            &t,
            base() + DAY + DAY / 2 + n,
            "m",
            None,
            u64::try_from(n).unwrap(),
        ));
    }
    assert!(
        ledger.spilled() > 0,
        "a queue of 50 spills a burst of 2,000"
    );
    task.shutdown().await;
    assert_eq!((ledger.written(), ledger.lost()), (2_000, 0));
    let totals = store.totals(0, i64::MAX, Some(&t)).await.unwrap();
    assert_eq!(totals.records, 2_000);
    let rows = store
        .usage(&Query::new(0, i64::MAX, Granularity::Total).tenant(t.clone()))
        .await
        .unwrap();
    assert_eq!(rows[0].requests, 2_000);
    assert_eq!(rows[0].cost_nanos, totals.cost_nanos);
    assert!(!spill.exists());
}

#[tokio::test]
async fn sqlite_the_writer_loses_nothing() {
    the_writer_loses_nothing(LedgerStore::in_memory().await.unwrap()).await;
}

/// On a multi-threaded runtime the file's writes tell the runtime that
/// they block (`block_in_place`): the same records arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_file_the_writer_loses_nothing() {
    let dir = TempDir::new("ledger-file");
    the_writer_loses_nothing(sqlite_file(&dir).await).await;
}

/// A file store's writes end with it: a batch after `close` is refused,
/// whole, and says why (the writer spills it for the next start).
#[tokio::test]
async fn a_closed_sqlite_file_refuses_batches() {
    let dir = TempDir::new("ledger-file");
    let store = sqlite_file(&dir).await;
    let t = unique("closed");
    store
        .insert(&[record(&t, base(), "m", None, 1)])
        .await
        .unwrap();
    store.close().await;
    let refused = store.insert(&[record(&t, base(), "m", None, 2)]).await;
    assert!(
        matches!(refused, Err(sluice_ledger::Error::Closed)),
        "{refused:?}"
    );
    let reopened = sqlite_file(&dir).await;
    let totals = reopened.totals(0, i64::MAX, Some(&t)).await.unwrap();
    assert_eq!(totals.records, 1, "the batch before the close, only");
}

#[tokio::test]
async fn postgres_the_writer_loses_nothing() {
    if let Some(store) = postgres().await {
        the_writer_loses_nothing(store).await;
    }
}

/// What budgets count, minute by minute: answered model and API calls
/// (requests), model tokens, cost; not failures' requests, not cache
/// hits, not job attempts, not other keys or tenants, not outside the
/// range.
async fn spend_is_read_as_budgets_count_it(store: &LedgerStore) {
    let (t, other) = (unique("spender"), unique("other"));
    let at = base() + DAY;
    let mut records = Vec::new();
    let mut call =
        |tenant: &str, key: &str, kind: &str, at_ms: i64, status: u16, cache_hit: bool| {
            let mut r = Record::new("r", tenant, kind, "openai", "m", "/v1/chat/completions");
            r.at_ms = at_ms;
            r.key_id = Some(key.to_owned());
            r.status = status;
            r.prompt_tokens = 100;
            r.completion_tokens = 10;
            r.cost_nanos = 7;
            r.cache_hit = cache_hit;
            records.push(r);
        };
    call(&t, "k1", "model", at + 1, 200, false);
    call(&t, "k1", "model", at + 59_999, 200, false);
    call(&t, "k1", "model", at + 60_000, 500, false); // a failure: no request
    call(&t, "k1", "model", at + 60_001, 200, true); // a cache hit: nothing
    call(&t, "k1", "api", at + 60_002, 200, false); // a request, no tokens
    call(&t, "k1", "job", at + 60_003, 200, false); // job attempts: nothing
    call(&t, "k2", "model", at + 60_004, 200, false); // another key
    call(&t, "k1", "model", at + 180_000, 200, false); // outside the range
    call(&other, "k1", "model", at + 1, 200, false);
    store.insert(&records).await.unwrap();

    let key = store.spent(&t, Some("k1"), at, at + 180_000).await.unwrap();
    assert_eq!(
        key,
        [
            Spent {
                minute_ms: at,
                requests: 2,
                tokens: 220,
                cost_nanos: 14
            },
            // The failure's tokens are its own (a failed call records 0
            // in the gateway); its request is given back.
            Spent {
                minute_ms: at + 60_000,
                requests: 1,
                tokens: 110,
                cost_nanos: 14
            },
        ]
    );
    let tenant = store.spent(&t, None, at, i64::MAX).await.unwrap();
    let total = tenant.iter().fold((0, 0, 0), |a, s| {
        (a.0 + s.requests, a.1 + s.tokens, a.2 + s.cost_nanos)
    });
    assert_eq!(total, (5, 550, 42));
    assert!(
        store
            .spent(&t, Some("k3"), 0, i64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn sqlite_spend_is_read_as_budgets_count_it() {
    spend_is_read_as_budgets_count_it(&LedgerStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn sqlite_file_spend_is_read_as_budgets_count_it() {
    let dir = TempDir::new("ledger-file");
    spend_is_read_as_budgets_count_it(&sqlite_file(&dir).await).await;
}

#[tokio::test]
async fn postgres_spend_is_read_as_budgets_count_it() {
    if let Some(store) = postgres().await {
        spend_is_read_as_budgets_count_it(&store).await;
    }
}

#[test]
fn names_parse_and_bad_ones_say_what_is_allowed() {
    assert_eq!("hour".parse::<Granularity>(), Ok(Granularity::Hour));
    assert!(
        "week"
            .parse::<Granularity>()
            .unwrap_err()
            .contains("minute, hour, day or total")
    );
    assert_eq!("key".parse::<Dim>(), Ok(Dim::Key));
    assert!(
        "user"
            .parse::<Dim>()
            .unwrap_err()
            .contains("tenant, key, model or feature")
    );
}
