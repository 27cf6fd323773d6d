//! The usage ledger under crashes (issue 34).
//!
//! 1. kill -9 during a spill replay, again and again: a spill file of
//!    known records (the default 10,000 with 3 kills; 100,000 with 20
//!    under `SLUICE_TEST_FAULTS_LONG=1`) is left in the data directory,
//!    `sluice serve` started on it and killed at random points of the
//!    write-back (a random count of records stored), then let finish.
//!    The ledger then holds every record once: its records, tokens and
//!    cost, and its rollups, equal the file's.
//! 2. kill -9 while the ledger's PostgreSQL is stalled (a lock the test
//!    holds on `usage_records`, so writes wait without failing): calls
//!    answered during the stall reach the spill file without the queue
//!    being full, so after the kill and a restart every answered call is
//!    in the ledger.
//! 3. The same on SQLite with a load running (the database locked by the
//!    test; its writes wait 10 s, then fail): the records lost at the
//!    kill are counted and printed against the stall bound.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_ledger::{Granularity, LedgerStore, Query, Record};
use sqlx::Connection;

use crate::procs::{self, PATIENCE, TempDir};
use crate::{chat, client, scale, sim, until, write_config};

/// The records of the spill file: (records, kills).
fn replay_size() -> (u64, usize) {
    if scale() > 1 {
        (100_000, 20)
    } else {
        (10_000, 3)
    }
}

/// `n` records of `tenant`, their figures driven by their index.
fn records(tenant: &str, n: u64) -> Vec<Record> {
    let now = sluice_ledger::now_ms();
    (0..n)
        .map(|i| {
            let mut r = Record::new(
                format!("req-{i}"),
                tenant,
                "model",
                "openai",
                if i % 2 == 0 {
                    "openai/gpt-4o-mini"
                } else {
                    "openai/gpt-4o"
                },
                "/v1/chat/completions",
            );
            r.at_ms = now - i64::try_from(i % 3_600).unwrap() * 1_000;
            r.status = if i % 10 == 0 { 500 } else { 200 };
            r.prompt_tokens = 100 + i % 1_000;
            r.completion_tokens = 10 + i % 100;
            r.cost_nanos = (i % 997 + 1) * 1_000;
            r
        })
        .collect()
}

/// Records, tokens and cost of `tenant` in the ledger at `db`: from the
/// raw records, and from the day rollups.
async fn ledger_sums(db: &Path, tenant: &str) -> ((u64, u64, u64), (u64, u64, u64)) {
    let store = LedgerStore::open(db).await.expect("the ledger opens");
    let t = store.totals(0, i64::MAX, Some(tenant)).await.unwrap();
    let mut q = Query::new(0, i64::MAX, Granularity::Day);
    q.tenant = Some(tenant.to_owned());
    let rows = store.usage(&q).await.unwrap();
    store.close().await;
    let rolled = rows.iter().fold((0, 0, 0), |a, r| {
        (
            a.0 + r.requests,
            a.1 + r.prompt_tokens + r.completion_tokens,
            a.2 + r.cost_nanos,
        )
    });
    (
        (
            t.records,
            t.prompt_tokens + t.completion_tokens,
            t.cost_nanos,
        ),
        rolled,
    )
}

/// Records stored in the SQLite ledger at `db` now (0 before its table
/// exists): read beside the writer, as any reader of the WAL may.
async fn stored_now(db: &Path) -> u64 {
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_secs(10));
    let Ok(mut conn) = sqlx::SqliteConnection::connect_with(&opts).await else {
        return 0;
    };
    let n: Result<i64, _> = sqlx::query_scalar("SELECT COUNT(*) FROM usage_records")
        .fetch_one(&mut conn)
        .await;
    let _ = conn.close().await;
    n.map_or(0, |n| u64::try_from(n).unwrap_or(0))
}

/// Whether the spill file at `spill` (or its copy taken aside) is there.
fn spill_left(spill: &Path) -> bool {
    let taken = PathBuf::from(format!("{}.importing", spill.display()));
    spill.exists() || taken.exists()
}

/// The gateway's config for the ledger tests: no traces, no jobs, no
/// model limits (the load is the ledger's, not the limiter's); `rest`
/// added.
fn config(dir: &TempDir, sim: &str, rest: &str) -> (PathBuf, String) {
    let rest = format!(
        "[trace]\nenabled = false\n[jobs]\nenabled = false\n{rest}\n[[models]]\nprefix = \"openai/gpt-4o-mini\"\n\
         requests_per_second = 100000.0\nburst = 100000\n"
    );
    write_config(&dir.0, "sluice.toml", sim, &rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_spill_replay_neither_loses_nor_repeats_a_record() {
    let (n, kills) = replay_size();
    let dir = TempDir::new("replay");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let spill = data.join("ledger-spill.jsonl");
    let db = data.join("ledger.db");
    let tenant = "replay";
    let all = records(tenant, n);
    let mut text = String::new();
    for r in &all {
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
    }
    std::fs::write(&spill, text).unwrap();
    let want = (
        n,
        all.iter()
            .map(|r| r.prompt_tokens + r.completion_tokens)
            .sum::<u64>(),
        all.iter().map(|r| r.cost_nanos).sum::<u64>(),
    );
    // Nothing upstream is called: the sim's address is never used.
    let (cfg, _) = config(&dir, "http://127.0.0.1:9", "");

    let mut points = Vec::new();
    for k in 0..kills {
        if !spill_left(&spill) {
            break;
        }
        let before = stored_now(&db).await;
        // A random point of what is left (a count of records stored),
        // spread so that every kill has room: on average the rest over
        // the kills still to come.
        let left = n.saturating_sub(before);
        let step = 2 * left / u64::try_from(kills - k + 1).unwrap();
        let target = before + fastrand::u64(1..step.max(2));
        let mut serve = procs::spawn_serve(&cfg);
        let end = Instant::now() + PATIENCE;
        let at = loop {
            let now = stored_now(&db).await;
            if now >= target || !spill_left(&spill) {
                break now;
            }
            assert!(
                Instant::now() < end,
                "the replay made no progress: {:#?}",
                serve.log()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        serve.kill();
        points.push(at);
    }
    // Started once more and let finish (once it listens, it has its
    // signal handlers: SIGTERM then drains rather than kills).
    let mut serve = procs::serve(&cfg);
    let end = Instant::now() + PATIENCE;
    while spill_left(&spill) {
        assert!(
            Instant::now() < end,
            "the replay never ended: {:#?}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.stop();

    let (raw, rolled) = ledger_sums(&db, tenant).await;
    let mid = points.iter().filter(|&&p| p > 0 && p < n).count();
    eprintln!(
        "spill replay of {n} records, kill -9 at {} random points (records stored at each: \
         {points:?}): the ledger holds {} records ({} duplicates), rollups {} requests",
        points.len(),
        raw.0,
        raw.0.saturating_sub(n),
        rolled.0,
    );
    assert!(mid > 0, "no kill landed inside the replay: {points:?}");
    assert_eq!(raw, want, "records, tokens and cost: each record once");
    assert_eq!(rolled, want, "the rollups count each record once");
}

/// Lines in the spill file at `spill` and its copy taken aside.
fn spilled_lines(spill: &Path) -> usize {
    let taken = PathBuf::from(format!("{}.importing", spill.display()));
    [spill.to_path_buf(), taken]
        .iter()
        .map(|p| std::fs::read_to_string(p).map_or(0, |s| s.lines().count()))
        .sum()
}

/// Sends `n` chat calls of `tenant` to the gateway at `url`, 8 at a
/// time, until they are sent or the gateway is gone; the count answered
/// 200.
async fn calls(url: &str, tenant: &str, n: usize) -> u64 {
    let http = client();
    let ok = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    let next = Arc::new(AtomicU64::new(0));
    for _ in 0..8 {
        let (http, url, ok, next, tenant) = (
            http.clone(),
            url.to_owned(),
            ok.clone(),
            next.clone(),
            tenant.to_owned(),
        );
        set.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n as u64 {
                let res = http
                    .post(format!("{url}/v1/chat/completions"))
                    .header("x-sluice-workspace", &tenant)
                    .json(&chat("openai/gpt-4o-mini", false))
                    .send()
                    .await;
                let Ok(res) = res else {
                    return;
                };
                if res.status() == 200 && res.bytes().await.is_ok() {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    ok.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_postgres_stalls_loses_no_answered_call() {
    let Some(pg) = procs::Postgres::start() else {
        return;
    };
    let sim = sim(sluice_sim::SimConfig::unlimited()).await;
    let dir = TempDir::new("stall-pg");
    let (cfg, url) = config(
        &dir,
        &sim.url(),
        &format!("[ledger]\nstore = \"{}\"\n", pg.url()),
    );
    let spill = dir.join("data").join("ledger-spill.jsonl");
    let tenant = "stalled";
    let mut serve = procs::serve(&cfg);
    // One call stored: the table is there and the writer idle.
    assert_eq!(calls(&url, tenant, 1).await, 1);
    let store = LedgerStore::connect(&pg.url()).await.unwrap();
    let end = Instant::now() + PATIENCE;
    while store
        .totals(0, i64::MAX, Some(tenant))
        .await
        .unwrap()
        .records
        < 1
    {
        assert!(Instant::now() < end, "the first record was never stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stall: a lock on the records' table, held by the test. The
    // gateway's INSERTs wait behind it without failing.
    let mut lock = sqlx::PgConnection::connect(&pg.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut lock).await.unwrap();
    sqlx::query("LOCK TABLE usage_records IN ACCESS EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .unwrap();
    const STALLED: usize = 40;
    let answered = calls(&url, tenant, STALLED).await;
    assert_eq!(answered, STALLED as u64);
    // Far below the queue's 1,000: only the stall bound puts them on disk.
    let end = Instant::now() + PATIENCE;
    while spilled_lines(&spill) < STALLED {
        assert!(
            Instant::now() < end,
            "{} of {STALLED} records spilled while the store stalled: {:#?}",
            spilled_lines(&spill),
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.kill();
    sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    drop(lock);
    let mut again = procs::serve(&cfg);
    until("the spill was never written back", || !spill_left(&spill)).await;
    again.stop();
    let stored = store
        .totals(0, i64::MAX, Some(tenant))
        .await
        .unwrap()
        .records;
    let served = sim.stats().model("gpt-4o-mini").ok;
    eprintln!(
        "PostgreSQL stalled: {answered} calls answered during the stall, kill -9, restart: \
         the sim served {served}, the ledger holds {stored}"
    );
    assert_eq!(stored, 1 + answered, "every answered call recorded once");
    assert_eq!(stored, served);
    store.close().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_sqlite_is_locked_loses_at_most_the_stall_bound() {
    let sim = sim(sluice_sim::SimConfig::unlimited()).await;
    let dir = TempDir::new("stall-sqlite");
    let (cfg, url) = config(&dir, &sim.url(), "");
    let data = dir.join("data");
    let spill = data.join("ledger-spill.jsonl");
    let tenant = "locked";
    let mut serve = procs::serve(&cfg);
    assert_eq!(calls(&url, tenant, 1).await, 1);
    let db = data.join("ledger.db");
    let end = Instant::now() + PATIENCE;
    while stored_now(&db).await < 1 {
        assert!(Instant::now() < end, "the first record was never stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The database locked by the test: the writer's transactions wait
    // (10 s, then fail).
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(&db);
    let mut lock = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut lock)
        .await
        .unwrap();
    // A load for a while, then the kill while it runs.
    let load = {
        let url = url.clone();
        tokio::spawn(async move { calls(&url, tenant, 1_000_000).await })
    };
    let end = Instant::now() + PATIENCE;
    while spilled_lines(&spill) == 0 {
        assert!(Instant::now() < end, "nothing spilled: {:#?}", serve.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stall is seen; the load goes on a while longer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    serve.kill();
    let answered_at_kill = load.await.unwrap();
    sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    drop(lock);
    let mut again = procs::serve(&cfg);
    until("the spill was never written back", || !spill_left(&spill)).await;
    again.stop();
    let stored = ledger_sums(&db, tenant).await.0.0;
    let served = sim.stats().model("gpt-4o-mini").ok;
    let lost = served.saturating_sub(stored);
    eprintln!(
        "SQLite locked, kill -9 under load: {answered_at_kill} answered, the sim served {served}, \
         the ledger holds {stored}: {lost} lost (what came since the stall guard's last look, every \
         250 ms, and during its fsync)"
    );
    assert!(stored <= served, "no record of a call that did not happen");
    // Count-based: the queue (1,000) never fills in a stall any more,
    // and what the kill can take is far below it.
    assert!(
        lost < 1_000,
        "lost {lost}: the queue was not spilled in the stall"
    );
    sim.shutdown().await;
}
