//! The jobs API's core flow on PostgreSQL: enqueue, idempotent replay,
//! read, list, tenant isolation, pause and counts, dead letters retried
//! and purged. Each test gets a database of its own on the server that
//! `SLUICE_TEST_POSTGRES_URL` names (`scripts/test` starts one and sets
//! it), dropped when the test ends; without it the tests print a note and
//! pass.

mod common;

use std::time::Duration;

use common::{Database, Harness, expect_error, header, postgres_server, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_jobs::{JobStore, PostgresStore, RetryDecision, StoreConfig};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

fn http_job() -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": "hi"}}
    })
}

/// The admin token of these gateways.
const ADMIN: &str = "s3cret";

async fn send(
    h: &Harness,
    method: reqwest::Method,
    path: &str,
    tenant: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut req = h.http.request(method, h.url(path));
    // Queue-wide calls are the operator's: "ops" stands for the admin.
    req = if tenant == "ops" {
        req.bearer_auth(ADMIN)
    } else {
        req.header("x-sluice-workspace", tenant)
    };
    if let Some(body) = body {
        req = req.json(body);
    }
    req.send().await.expect("the gateway answers")
}

async fn json_of(res: reqwest::Response, status: StatusCode) -> Value {
    assert_eq!(res.status(), status, "{:?}", res.url());
    res.json().await.expect("JSON")
}

/// Claims every available job of `default` and fails it for good, as a
/// worker meeting a 404 would; how many.
async fn fail_all_for_good(store: &PostgresStore) -> usize {
    let claimed = store
        .claim("default", "test-worker", 10, Duration::from_secs(60))
        .await
        .unwrap();
    for job in &claimed {
        store
            .fail(
                job.lease.as_ref().unwrap(),
                "404 from upstream",
                RetryDecision::Dead,
            )
            .await
            .unwrap();
    }
    claimed.len()
}

/// A gateway without workers (job states stay put) on a fresh database;
/// the database with it.
async fn api_only(server: &str) -> (Database, Harness) {
    let db = common::fresh_database(server, "jobs_api").await;
    let store_url = db.url.clone();
    let h = Harness::with(sim_config(), move |c| {
        c.jobs.workers = false;
        c.admin_token = Some(ADMIN.into());
        c.jobs.store = store_url;
    })
    .await;
    (db, h)
}

#[tokio::test]
async fn the_core_flow_on_postgresql() {
    use reqwest::Method as M;
    let Some(server) = postgres_server("the PostgreSQL jobs API test") else {
        return;
    };
    let (db, h) = api_only(&server).await;
    assert!(!h.data_dir.join("jobs.db").exists(), "no SQLite file");

    // Enqueue, replay by key, read.
    let res = h
        .post("/v1/jobs", &http_job())
        .header("x-sluice-workspace", "acme")
        .header("idempotency-key", "k1")
        .send()
        .await
        .unwrap();
    let job = json_of(res, StatusCode::CREATED).await;
    let id = job["id"].as_i64().unwrap();
    let res = h
        .post("/v1/jobs", &http_job())
        .header("x-sluice-workspace", "acme")
        .header("idempotency-key", "k1")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&res, "x-sluice-idempotent-replay"), "true");
    assert_eq!(json_of(res, StatusCode::OK).await["id"], id);
    let read = json_of(
        send(&h, M::GET, &format!("/v1/jobs/{id}"), "acme", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["state"], "available");

    // A batch, then pages of two.
    let batch = json!({"jobs": [http_job(), http_job(), http_job()]});
    let res = send(&h, M::POST, "/v1/jobs/batch", "acme", Some(&batch)).await;
    assert_eq!(
        json_of(res, StatusCode::CREATED).await["jobs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let mut seen = 0;
    let mut path = "/v1/jobs?limit=2".to_owned();
    loop {
        let page = json_of(send(&h, M::GET, &path, "acme", None).await, StatusCode::OK).await;
        seen += page["jobs"].as_array().unwrap().len();
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/jobs?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, 4);

    // Another tenant sees none of it.
    expect_error(
        send(&h, M::GET, &format!("/v1/jobs/{id}"), "globex", None).await,
        404,
        "not_found",
    )
    .await;
    let page = json_of(
        send(&h, M::GET, "/v1/jobs", "globex", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(page["jobs"].as_array().unwrap().len(), 0);

    // Pause, counts, resume.
    json_of(
        send(&h, M::POST, "/v1/queues/default/pause", "ops", None).await,
        StatusCode::OK,
    )
    .await;
    let queues = json_of(
        send(&h, M::GET, "/v1/queues", "ops", None).await,
        StatusCode::OK,
    )
    .await;
    let default = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "default")
        .unwrap()
        .clone();
    assert_eq!(
        (
            default["paused"].as_bool(),
            default["counts"]["available"].as_u64()
        ),
        (Some(true), Some(4))
    );
    json_of(
        send(&h, M::POST, "/v1/queues/default/resume", "ops", None).await,
        StatusCode::OK,
    )
    .await;

    // Dead letters, made as a worker would, retried and purged.
    let store = PostgresStore::connect(&db.url, StoreConfig::default())
        .await
        .expect("connect");
    assert_eq!(fail_all_for_good(&store).await, 4);
    expect_error(
        send(&h, M::POST, &format!("/v1/jobs/{id}/cancel"), "acme", None).await,
        409,
        "conflict",
    )
    .await;
    let again = json_of(
        send(&h, M::POST, &format!("/v1/jobs/{id}/retry"), "acme", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["state"], "available");
    let res = send(&h, M::POST, "/v1/queues/default/dead/retry", "ops", None).await;
    assert_eq!(json_of(res, StatusCode::OK).await["retried"], 3);
    fail_all_for_good(&store).await;
    let res = send(&h, M::DELETE, "/v1/queues/default/dead", "ops", None).await;
    assert_eq!(json_of(res, StatusCode::OK).await["purged"], 4);
    store.close().await;
    h.stop().await;
}

#[tokio::test]
async fn an_unreachable_postgresql_stops_the_start_naming_the_url_without_its_password() {
    let Some(server) = postgres_server("the PostgreSQL jobs API test") else {
        return;
    };
    // The server's own URL with a database that does not exist and a password.
    let mut url = url::Url::parse(&server).unwrap();
    url.set_path("no_such_database_here");
    let _ = url.set_password(Some("hunter2"));
    let mut config = sluice_gateway::config::Config::default();
    config.jobs.store = url.to_string();
    config.trace.enabled = false;
    let e = sluice_gateway::Gateway::bind(config, Some("127.0.0.1:0".parse().unwrap()))
        .await
        .expect_err("the start fails");
    let shown = e.to_string();
    assert!(shown.contains("no_such_database_here"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_run_jobs_from_postgresql() {
    use reqwest::Method as M;
    let Some(server) = postgres_server("the PostgreSQL jobs API test") else {
        return;
    };
    let db = common::fresh_database(&server, "jobs_api").await;
    let store_url = db.url.clone();
    let h = Harness::with(sim_config(), move |c| c.jobs.store = store_url).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let res = send(&h, M::POST, "/v1/jobs", "acme", Some(&http_job())).await;
        ids.push(
            json_of(res, StatusCode::CREATED).await["id"]
                .as_i64()
                .unwrap(),
        );
    }
    for id in ids {
        let mut tries = 0;
        loop {
            let res = send(&h, M::GET, &format!("/v1/jobs/{id}"), "acme", None).await;
            let job = json_of(res, StatusCode::OK).await;
            if job["state"] == "completed" {
                assert_eq!(job["attempts"], 1);
                break;
            }
            tries += 1;
            assert!(tries < 3_000, "job {id} never completed: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn a_store_that_goes_away_is_a_503_not_a_lost_job() {
    use reqwest::Method as M;
    let Some(server) = postgres_server("the PostgreSQL jobs API test") else {
        return;
    };
    let (db, h) = api_only(&server).await;
    let res = send(&h, M::POST, "/v1/jobs", "acme", Some(&http_job())).await;
    json_of(res, StatusCode::CREATED).await;
    // The database disappears under the gateway (its connections cut).
    let name = url::Url::parse(&db.url)
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_owned();
    let mut conn = PgConnection::connect(&server).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
        .execute(&mut conn)
        .await
        .expect("drop the database");
    conn.close().await.unwrap();
    let res = send(&h, M::POST, "/v1/jobs", "acme", Some(&http_job())).await;
    let e = expect_error(res, 503, "unavailable").await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("job store is unavailable"),
        "{e}"
    );
    let res = send(&h, M::GET, "/v1/jobs", "acme", None).await;
    expect_error(res, 503, "unavailable").await;
    h.stop().await;
}
