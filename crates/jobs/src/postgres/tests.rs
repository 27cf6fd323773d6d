//! What a claim reads on PostgreSQL once many jobs have been claimed and
//! finished, before VACUUM has removed their stale index entries; and
//! that a heartbeat renews a lease in place. Counted in buffers read
//! (`EXPLAIN (ANALYZE, BUFFERS)`), which load does not move.
//!
//! Needs `SLUICE_TEST_POSTGRES_URL`, as the store suite does.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use super::*;
use crate::{JobStore, ManualClock, NewJob, Timestamp};

const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// Jobs claimed and completed before the claim is measured.
const FINISHED: usize = 25_000;
const LEASE: Duration = Duration::from_secs(30);

fn url() -> String {
    std::env::var("SLUICE_TEST_POSTGRES_URL")
        .expect("SLUICE_TEST_POSTGRES_URL names the PostgreSQL server of the tests")
}

/// Runs `ddl` on a connection of its own.
async fn run_ddl(ddl: String) {
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    sqlx::raw_sql(AssertSqlSafe(ddl))
        .execute(&mut conn)
        .await
        .expect("DDL");
    conn.close().await.expect("close");
}

/// A pool on a new schema of its own (named after `what`), and that
/// schema.
async fn schema_pool(what: &str) -> (sqlx::PgPool, String) {
    let schema = format!("jobs_{what}_{}_{}", std::process::id(), fastrand::u32(..));
    run_ddl(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
    ))
    .await;
    let options = without_jit(PgConnectOptions::from_str(&url()).expect("a URL"))
        .options([("search_path", schema.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("connect");
    (pool, schema)
}

/// A store in a new schema of its own, and that schema.
async fn store() -> (PostgresStore, String) {
    let (pool, schema) = schema_pool("claim").await;
    let config = StoreConfig::default().clock(ManualClock::new(T0));
    let store = PostgresStore::from_pool(pool, config)
        .await
        .expect("migrate");
    (store, schema)
}

async fn drop_schema(schema: &str) {
    run_ddl(format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
}

/// Every plan node of `plan`, depth first.
fn nodes(plan: &Value, out: &mut Vec<Value>) {
    out.push(plan.clone());
    for child in plan["Plans"].as_array().into_iter().flatten() {
        nodes(child, out);
    }
}

/// `claim` walking the tenants and groups forwards, as it did before:
/// the figures side by side in one run.
fn walking_forwards(claim: &str) -> String {
    claim
        .replace("ORDER BY tenant DESC LIMIT 1", "ORDER BY tenant LIMIT 1")
        .replace(
            "j.tenant < tenants.t ORDER BY j.tenant DESC",
            "j.tenant > tenants.t ORDER BY j.tenant",
        )
        .replace("ORDER BY j.grp DESC LIMIT 1", "ORDER BY j.grp LIMIT 1")
        .replace("j.grp < grps.grp", "j.grp > grps.grp")
}

/// Buffers read by the claim of 100 (rolled back): in all, by each probe
/// that finds a tenant or a group, and by the ranking's read of the
/// group's first jobs; and the execution time in ms.
async fn explain_claim(store: &PostgresStore, claim: &str) -> (i64, Vec<i64>, i64, f64) {
    let mut tx = store.pool().begin().await.expect("begin");
    let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {claim}");
    let row = sqlx::query(AssertSqlSafe(explain))
        .bind("burn")
        .bind(T0.as_millis())
        .bind(100_i64)
        .bind("measure")
        .bind(T0.as_millis() + 30_000)
        .fetch_one(&mut *tx)
        .await
        .expect("explain the claim");
    tx.rollback().await.expect("roll back");
    // `json`, sent as its text: sqlx decodes it without the json feature.
    let out: Value =
        serde_json::from_str(row.try_get_unchecked::<&str, _>(0).expect("a plan")).expect("JSON");
    let top = &out[0];
    let mut all = Vec::new();
    nodes(&top["Plan"], &mut all);
    let hits = |n: &Value| {
        n["Shared Hit Blocks"].as_i64().unwrap_or(0) + n["Shared Read Blocks"].as_i64().unwrap_or(0)
    };
    let (mut probes, mut firsts) = (Vec::new(), 0);
    for node in all.iter().filter(|n| n["Index Name"] == "jobs_ready") {
        // The ranking's read bounds `run_at`; the probes do not.
        match node["Index Cond"].as_str() {
            Some(cond) if cond.contains("run_at") => firsts += hits(node),
            _ => probes.push(hits(node)),
        }
    }
    let ms = top["Execution Time"].as_f64().unwrap_or(0.0);
    (hits(&top["Plan"]), probes, firsts, ms)
}

#[tokio::test]
async fn a_claim_finds_its_groups_without_crossing_finished_jobs() {
    let (store, schema) = store().await;
    // As during a burn-down: no VACUUM has come by yet.
    sqlx::query("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        .execute(store.pool())
        .await
        .expect("autovacuum off");
    for start in (0..FINISHED + 1_000).step_by(1_000) {
        let batch = (start..start + 1_000)
            .map(|i| NewJob::new("burn", "noop", json!({ "i": i })))
            .collect();
        store.enqueue_batch(batch).await.expect("enqueue");
    }
    // A transaction with a snapshot older than every claim below.
    let mut reader = PgConnection::connect(&url()).await.expect("connect");
    let mut old = reader
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .expect("begin");
    sqlx::query("SELECT 1")
        .execute(&mut *old)
        .await
        .expect("a snapshot");
    let mut old = Some(old);
    let mut done = 0;
    while done < FINISHED {
        let jobs = store.claim("burn", "w", 500, LEASE).await.expect("claim");
        done += jobs.len();
        let items = jobs
            .into_iter()
            .map(|j| (j.lease.expect("leased"), Value::Null))
            .collect();
        for result in store.complete_many(items).await.expect("complete") {
            result.expect("completed");
        }
    }

    let claim = sql::POSTGRES.claim;
    let forwards = walking_forwards(claim);
    // While a transaction older than the claims is open (a long report,
    // a backup), no scan may mark their stale entries dead: each is
    // checked against its row. Then, once it ends, the first scan marks
    // them and the next ones skip them, a page at a time.
    for _ in 0..2 {
        let old_snapshot = old.is_some();
        let before = explain_claim(&store, &forwards).await;
        let after = explain_claim(&store, claim).await;
        println!(
            "a claim of 100 over {FINISHED} finished jobs{}: walking forwards {} buffers \
             (probes {:?}, first jobs {}) in {:.2} ms; backwards {} buffers (probes {:?}, \
             first jobs {}) in {:.2} ms",
            if old_snapshot {
                ", an older transaction open"
            } else {
                ""
            },
            before.0,
            before.1,
            before.2,
            before.3,
            after.0,
            after.1,
            after.2,
            after.3
        );
        assert_eq!(
            after.1.len(),
            4,
            "two tenant probes, two group probes: {:?}",
            after.1
        );
        // Each probe lands on its group's last entry, a live job: a
        // descent of the index and a leaf, not the stale entries in front.
        assert!(after.1.iter().all(|&b| b <= 8), "{:?}", after.1);
        // Walked forwards, the first probes crossed them all.
        assert!(
            before.1.iter().sum::<i64>() > 10 * after.1.iter().sum::<i64>(),
            "{:?}",
            before.1
        );
        if let Some(old) = old.take() {
            old.commit().await.expect("end the old transaction");
            // Its snapshot is gone: let a scan mark the entries dead.
            explain_claim(&store, &forwards).await;
        }
    }
    drop(old);
    reader.close().await.expect("close");
    store.close().await;
    drop_schema(&schema).await;
}

#[tokio::test]
async fn a_heartbeat_renews_a_lease_in_place() {
    let (store, schema) = store().await;
    let batch = (0..100)
        .map(|i| NewJob::new("q", "noop", json!({ "i": i })))
        .collect();
    store.enqueue_batch(batch).await.expect("enqueue");
    let leases: Vec<_> = store
        .claim("q", "w", 100, LEASE)
        .await
        .expect("claim")
        .into_iter()
        .map(|j| j.lease.expect("leased"))
        .collect();
    // The renewal runs in a transaction of this test's own, so that its
    // counts of updates (HOT or not) are this transaction's alone.
    let mut tx = store.pool().begin().await.expect("begin");
    let ids: Vec<i64> = leases.iter().map(|l| l.job.0).collect();
    let owners: Vec<&str> = leases.iter().map(|l| l.owner.as_str()).collect();
    let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
    let renewed = sqlx::query(sql::POSTGRES.heartbeat_many)
        .bind(T0.as_millis() + 60_000)
        .bind(T0.as_millis())
        .bind(&ids)
        .bind(&owners)
        .bind(&tokens)
        .fetch_all(&mut *tx)
        .await
        .expect("heartbeat");
    assert_eq!(renewed.len(), 100);
    let counts = sqlx::query(
        "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass), \
                pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)",
    )
    .fetch_one(&mut *tx)
    .await
    .expect("counts");
    let (updated, hot): (i64, i64) = (counts.get(0), counts.get(1));
    tx.commit().await.expect("commit");
    println!("heartbeat of 100 leases: {updated} rows updated, {hot} of them in place (HOT)");
    assert_eq!(updated, 100);
    // Keyed on `lease_expires_at`, `jobs_running` made every renewal a
    // new entry in every index (none HOT). Now a renewal that fits on its
    // page (a fifth is left free) is HOT; how many fit depends on what
    // the claim's new row versions took and what the server could prune
    // (27 and 67 of 100 in two runs).
    assert!(hot > 0, "{hot} of {updated} HOT");
    store.close().await;
    drop_schema(&schema).await;
}

/// Every `jobs` scan of the plan of `statement` (run after `setup` in a
/// transaction rolled back): its type, index and index condition, and the
/// buffers of the whole.
async fn jobs_scans(store: &PostgresStore, setup: &str, statement: &str) -> (Vec<String>, i64) {
    let mut tx = store.pool().begin().await.expect("begin");
    sqlx::raw_sql(AssertSqlSafe(setup.to_string()))
        .execute(&mut *tx)
        .await
        .expect("prepare");
    let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}");
    let row = sqlx::raw_sql(AssertSqlSafe(explain))
        .fetch_one(&mut *tx)
        .await
        .expect("explain");
    tx.rollback().await.expect("roll back");
    let out: Value =
        serde_json::from_str(row.try_get_unchecked::<&str, _>(0).expect("a plan")).expect("JSON");
    let mut all = Vec::new();
    nodes(&out[0]["Plan"], &mut all);
    let scans = all
        .iter()
        .filter(|n| n["Relation Name"] == "jobs" && n["Node Type"] != "ModifyTable")
        .map(|n| {
            format!(
                "{} {} {}",
                n["Node Type"].as_str().unwrap_or(""),
                n["Index Name"].as_str().unwrap_or("-"),
                n["Index Cond"]
                    .as_str()
                    .or(n["Recheck Cond"].as_str())
                    .unwrap_or("-")
            )
        })
        .collect();
    let hits = out[0]["Plan"]["Shared Hit Blocks"].as_i64().unwrap_or(0);
    (scans, hits)
}

#[tokio::test]
async fn claims_and_completions_look_their_jobs_up_by_id() {
    let (store, schema) = store().await;
    sqlx::query("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        .execute(store.pool())
        .await
        .expect("autovacuum off");
    let batch = (0..6_000)
        .map(|i| NewJob::new("burn", "noop", json!({ "i": i })))
        .collect();
    store.enqueue_batch(batch).await.expect("enqueue");
    // Finished jobs leave their entries in `jobs_running` until VACUUM.
    for _ in 0..10 {
        let jobs = store.claim("burn", "w", 500, LEASE).await.expect("claim");
        let items = jobs
            .into_iter()
            .map(|j| (j.lease.expect("leased"), Value::Null))
            .collect();
        store.complete_many(items).await.expect("complete");
    }
    let jobs = store.claim("burn", "w", 200, LEASE).await.expect("claim");
    let batch: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let lease = j.lease.as_ref().expect("leased");
            json!({ "id": lease.job.0, "owner": lease.owner, "token": lease.token, "result": "null" })
        })
        .collect();
    // The completion as the batcher sends it, its parameters inlined.
    let completion = sql::POSTGRES
        .complete_ids
        .replace("$1", &T0.as_millis().to_string())
        .replace("$2", &format!("'{}'", Value::from(batch)));
    let (scans, hits) = jobs_scans(&store, "SELECT 1", &completion).await;
    println!("a completion of 200 after 5,000 finished jobs: {hits} buffers, {scans:?}");
    assert!(
        scans.iter().all(|s| s.contains("id = ANY")),
        "by id: {scans:?}"
    );
    // The claim on its generic plan (as `begin_claim` runs it): the
    // candidates are looked up by id too.
    let prepare = format!(
        "SET LOCAL plan_cache_mode = force_generic_plan; \
         PREPARE c(text, bigint, bigint, text, bigint) AS {}",
        sql::POSTGRES.claim
    );
    let execute = format!(
        "EXECUTE c('burn', {}, 200, 'w', {})",
        T0.as_millis(),
        T0.as_millis() + 30_000
    );
    let (scans, hits) = jobs_scans(&store, &prepare, &execute).await;
    println!("a claim of 200 on its generic plan: {hits} buffers, {scans:?}");
    let by_id = |s: &&String| s.contains("id = ANY") || s.contains("id = picked");
    assert_eq!(
        scans.iter().filter(by_id).count(),
        2,
        "the candidates and the update by id: {scans:?}"
    );
    assert!(
        scans
            .iter()
            .filter(|s| !by_id(s))
            .all(|s| s.contains("jobs_ready")),
        "the rest walks jobs_ready: {scans:?}"
    );
    store.close().await;
    drop_schema(&schema).await;
}

/// A claimer that finds the first jobs of the tenants served longest ago
/// locked by another claimer's open transaction still takes as many jobs
/// as it asked for, none of them locked; and the tenants it could not
/// serve first go first in the next claim.
#[tokio::test]
async fn a_claim_past_locked_first_picks_is_full_and_turns_resume() {
    let (store, schema) = store().await;
    let batch = (0..20)
        .flat_map(|t| {
            (0..3).map(move |_| NewJob::new("q", "noop", json!({})).tenant(format!("t{t:02}")))
        })
        .collect();
    store.enqueue_batch(batch).await.expect("enqueue");
    // One job of each tenant: every tenant has now been served, in turn.
    let served: Vec<String> = store
        .claim("q", "w", 20, LEASE)
        .await
        .expect("claim")
        .into_iter()
        .map(|j| j.tenant)
        .collect();
    assert_eq!(served.len(), 20);
    // Another claimer holds the next job of each of the five tenants
    // served longest ago.
    let mut other = store.pool().begin().await.expect("begin");
    let locked: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE id IN ( \
           SELECT min(id) FROM jobs WHERE state = 'available' AND tenant = ANY($1) GROUP BY tenant) \
         FOR UPDATE",
    )
    .bind(&served[..5])
    .fetch_all(&mut *other)
    .await
    .expect("lock");
    assert_eq!(locked.len(), 5);
    let jobs = store.claim("q", "w", 5, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 5, "a full claim: {jobs:?}");
    assert!(jobs.iter().all(|j| !locked.contains(&j.id.0)), "{jobs:?}");
    other.rollback().await.expect("rollback");
    // Those five tenants were just served: the other fifteen go first.
    let mut next: Vec<String> = store
        .claim("q", "w", 15, LEASE)
        .await
        .expect("claim")
        .into_iter()
        .map(|j| j.tenant)
        .collect();
    next.sort();
    let mut rest = served[5..].to_vec();
    rest.sort();
    assert_eq!(next, rest, "one job for each tenant that waited");
    store.close().await;
    drop_schema(&schema).await;
}

/// A database made before migration 13 (counts through `jobs_queue_state`,
/// every event listed by job) opens with its jobs counted as before and
/// each job's timeline whole: migration 14 takes each run's start from
/// the `active` events already written (as SQLite's upgrade test).
#[tokio::test]
async fn an_older_database_keeps_its_counts_and_timelines() {
    let (pool, schema) = schema_pool("upgrade").await;
    sluice_store::Schema::new(&crate::migrate::POSTGRES_STEPS[..12])
        .migrator()
        .run(&pool)
        .await
        .expect("the older schema");
    sqlx::raw_sql(crate::migrate::older::HISTORY)
        .execute(&pool)
        .await
        .expect("an older history");
    let config = StoreConfig::default().clock(ManualClock::new(T0));
    let store = PostgresStore::from_pool(pool, config)
        .await
        .expect("migrate");
    crate::migrate::older::check(&store).await;
    drop(store);
    drop_schema(&schema).await;
}
