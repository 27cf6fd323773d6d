//! The jobs API against a real SQLite store in a temporary directory:
//! enqueue, read, list and page, idempotent replays, tenant isolation,
//! batches, queue pause/resume/counts, dead letters, and a 400 naming the
//! field for every bad input.
//!
//! These gateways run no workers (`jobs.workers = false`), so every job
//! stays where the test put it; dead letters are made by claiming and
//! failing jobs through the same SQLite file, as a worker would.

mod common;

use std::time::Duration;

use common::{Harness, expect_error, header, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, QueueSettings, TenantConfig};
use sluice_jobs::{JobStore, RetryDecision, SqliteStore, StoreConfig};

/// An `http` job on `queue` that posts to the sim's Slack.
fn http_job(queue: &str) -> Value {
    json!({
        "queue": queue,
        "kind": "http",
        "payload": {
            "api": "slack",
            "method": "POST",
            "path": "/api/chat.postMessage",
            "body": {"channel": "C1", "text": "hello"}
        }
    })
}

/// A `discord.create_role` job with this payload.
fn discord(payload: Value) -> Value {
    json!({"queue": "discord", "kind": "discord.create_role", "payload": payload})
}

/// The operator's token in these gateways, and the name the helpers below
/// take as "the operator" (queue-wide calls are the admin's).
const ADMIN: &str = "s3cret";
const OPS: &str = "ops";

/// A gateway that answers the jobs API and runs no workers.
async fn api_only(edit: impl FnOnce(&mut Config)) -> Harness {
    Harness::with(sim_config(), |c| {
        c.jobs.workers = false;
        c.admin_token = Some(ADMIN.into());
        edit(c);
    })
    .await
}

async fn enqueue(h: &Harness, tenant: &str, body: &Value) -> reqwest::Response {
    h.post("/v1/jobs", body)
        .header("x-sluice-workspace", tenant)
        .send()
        .await
        .expect("the gateway answers")
}

async fn created(h: &Harness, tenant: &str, body: &Value) -> Value {
    let res = enqueue(h, tenant, body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.expect("a job")
}

/// `method path` as `tenant`, or with the admin token as [`OPS`].
async fn call(h: &Harness, method: reqwest::Method, path: &str, tenant: &str) -> reqwest::Response {
    let req = h.http.request(method, h.url(path));
    let req = if tenant == OPS {
        req.bearer_auth(ADMIN)
    } else {
        req.header("x-sluice-workspace", tenant)
    };
    req.send().await.expect("the gateway answers")
}

async fn get(h: &Harness, path: &str, tenant: &str) -> reqwest::Response {
    call(h, reqwest::Method::GET, path, tenant).await
}

async fn post(h: &Harness, path: &str, tenant: &str) -> reqwest::Response {
    call(h, reqwest::Method::POST, path, tenant).await
}

async fn ok_json(res: reqwest::Response) -> Value {
    assert_eq!(res.status(), StatusCode::OK, "{:?}", res.url());
    res.json().await.expect("JSON")
}

/// The ids of a list answer.
fn ids(page: &Value) -> Vec<i64> {
    page["jobs"]
        .as_array()
        .expect("a `jobs` array")
        .iter()
        .map(|j| j["id"].as_i64().expect("an id"))
        .collect()
}

/// The counts of `queue` in `GET /v1/queues`.
async fn queue(h: &Harness, name: &str) -> Value {
    let body = ok_json(get(h, "/v1/queues", OPS).await).await;
    body["queues"]
        .as_array()
        .expect("a `queues` array")
        .iter()
        .find(|q| q["queue"] == name)
        .unwrap_or_else(|| panic!("queue {name} in {body}"))
        .clone()
}

/// The gateway's job store, opened again from the test as a second
/// connection to the same file (WAL allows it).
async fn same_store(h: &Harness) -> SqliteStore {
    SqliteStore::open(h.data_dir.join("jobs.db"), StoreConfig::default())
        .await
        .expect("the gateway's jobs.db opens")
}

/// Claims every due job of `queue` and fails it for good, as a worker
/// meeting a 4xx would.
async fn kill_all(store: &SqliteStore, queue: &str) -> usize {
    let jobs = store
        .claim(queue, "test-worker", 100, Duration::from_secs(60))
        .await
        .expect("claim");
    for job in &jobs {
        let lease = job.lease.as_ref().expect("a claimed job is leased");
        store
            .fail(lease, "400 from upstream", RetryDecision::Dead)
            .await
            .expect("fail");
    }
    jobs.len()
}

#[tokio::test]
async fn a_job_is_stored_read_and_listed_page_by_page() {
    let h = api_only(|_| {}).await;
    let job = created(&h, "acme", &http_job("default")).await;
    assert_eq!(job["state"], "available");
    assert_eq!(job["attempts"], 0);
    assert_eq!(job["max_attempts"], 3, "the queue's default");
    assert_eq!(job["queue"], "default");
    assert_eq!(job["kind"], "http");
    let id = job["id"].as_i64().expect("an integer id");

    let read = ok_json(get(&h, &format!("/v1/jobs/{id}"), "acme").await).await;
    assert_eq!(read, job);

    let mut all = vec![id];
    for i in 0..6 {
        let mut body = http_job("default");
        body["priority"] = json!(i);
        body["group"] = json!(format!("g{}", i % 2));
        all.push(created(&h, "acme", &body).await["id"].as_i64().unwrap());
    }
    // Seven jobs, pages of three: 3 + 3 + 1, each page's cursor leading
    // to the next, in id order, none twice.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/jobs?limit=3&cursor={c}"),
            None => "/v1/jobs?limit=3".to_owned(),
        };
        let page = ok_json(get(&h, &path, "acme").await).await;
        seen.extend(ids(&page));
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10, "pagination ends");
    }
    assert_eq!(seen, all);
    assert_eq!(pages, 3);

    // Filters: by queue and by state.
    let page = ok_json(get(&h, "/v1/jobs?queue=default&state=available", "acme").await).await;
    assert_eq!(ids(&page), all);
    let page = ok_json(get(&h, "/v1/jobs?state=dead", "acme").await).await;
    assert_eq!(ids(&page), Vec::<i64>::new());
    assert_eq!(page["next_cursor"], Value::Null);
    h.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_returns_the_original_job() {
    let h = api_only(|_| {}).await;
    let send = |tenant: &'static str, key: &'static str| {
        h.post("/v1/jobs", &http_job("default"))
            .header("x-sluice-workspace", tenant)
            .header("idempotency-key", key)
            .send()
    };
    let first = send("acme", "role-42").await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(first.headers().get("x-sluice-idempotent-replay").is_none());
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["idempotency_key"], "role-42");

    let again = send("acme", "role-42").await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(header(&again, "x-sluice-idempotent-replay"), "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);

    // Keys are per tenant: another tenant's same key is another job.
    let other = send("globex", "role-42").await.unwrap();
    assert_eq!(other.status(), StatusCode::CREATED);
    let other: Value = other.json().await.unwrap();
    assert_ne!(other["id"], first["id"]);

    // One job for acme, not two.
    let page = ok_json(get(&h, "/v1/jobs", "acme").await).await;
    assert_eq!(ids(&page), vec![first["id"].as_i64().unwrap()]);

    let metrics = h.metrics().await;
    assert!(
        metrics.contains("sluice_jobs_idempotency_total{result=\"hit\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_jobs_idempotency_total{result=\"miss\"}"));
    h.stop().await;
}

#[tokio::test]
async fn a_tenant_cannot_see_or_touch_another_tenants_jobs() {
    let h = api_only(|_| {}).await;
    let mine = created(&h, "acme", &http_job("default")).await;
    let id = mine["id"].as_i64().unwrap();
    created(&h, "globex", &http_job("default")).await;

    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/jobs/{id}")),
        (reqwest::Method::POST, format!("/v1/jobs/{id}/cancel")),
        (reqwest::Method::POST, format!("/v1/jobs/{id}/retry")),
    ] {
        let res = call(&h, method, &path, "globex").await;
        expect_error(res, 404, "not_found").await;
    }
    let page = ok_json(get(&h, "/v1/jobs", "globex").await).await;
    assert!(!ids(&page).contains(&id));
    assert_eq!(ids(&page).len(), 1);
    // Still there, still available, for its owner.
    let read = ok_json(get(&h, &format!("/v1/jobs/{id}"), "acme").await).await;
    assert_eq!(read["state"], "available");
    h.stop().await;
}

#[tokio::test]
async fn a_list_skips_other_tenants_jobs_without_losing_its_place() {
    let h = api_only(|_| {}).await;
    // acme's jobs are far apart among globex's.
    let mut acme = Vec::new();
    for i in 0..30 {
        let tenant = if i % 10 == 0 { "acme" } else { "globex" };
        let job = created(&h, tenant, &http_job("default")).await;
        if tenant == "acme" {
            acme.push(job["id"].as_i64().unwrap());
        }
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..30 {
        let page =
            ok_json(get(&h, &format!("/v1/jobs?limit=2&cursor={cursor}"), "acme").await).await;
        seen.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, acme);
    h.stop().await;
}

/// A tenant whose few jobs lie far apart among another tenant's gets them
/// all in one page (the list is filtered in the store's query, not by
/// skipping others' jobs a bounded number of pages deep), and a list
/// leaves out payloads and results, which one job's read still has.
#[tokio::test]
async fn a_tenants_page_is_full_however_many_jobs_others_have() {
    let h = api_only(|_| {}).await;
    let mut acme = Vec::new();
    for _ in 0..3 {
        for _ in 0..40 {
            created(&h, "globex", &http_job("default")).await;
        }
        acme.push(
            created(&h, "acme", &http_job("default")).await["id"]
                .as_i64()
                .unwrap(),
        );
    }
    let page = ok_json(get(&h, "/v1/jobs?limit=3", "acme").await).await;
    assert_eq!(ids(&page), acme, "one page holds all three");
    for job in page["jobs"].as_array().unwrap() {
        assert_eq!(job["tenant"], "acme");
        assert!(
            job.get("payload").is_none() && job.get("result").is_none(),
            "a list leaves payloads and results out: {job}"
        );
        assert_eq!(job["kind"], "http", "and keeps the rest");
    }
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a full page has a cursor");
    let rest = ok_json(get(&h, &format!("/v1/jobs?limit=3&cursor={cursor}"), "acme").await).await;
    assert_eq!((ids(&rest), &rest["next_cursor"]), (vec![], &Value::Null));

    let one = ok_json(get(&h, &format!("/v1/jobs/{}", acme[0]), "acme").await).await;
    assert_eq!(
        one["payload"]["api"], "slack",
        "one job's read has its payload"
    );

    let theirs = ok_json(get(&h, "/v1/jobs?limit=1000", "globex").await).await;
    assert_eq!(ids(&theirs).len(), 120);
    assert!(ids(&theirs).iter().all(|id| !acme.contains(id)));
    h.stop().await;
}

#[tokio::test]
async fn every_bad_input_is_a_400_naming_its_field() {
    let h = api_only(|_| {}).await;
    let job = http_job("default");
    let with = |key: &str, value: Value| {
        let mut b = job.clone();
        b[key] = value;
        b
    };
    let without = |key: &str| {
        let mut b = job.clone();
        b.as_object_mut().unwrap().remove(key);
        b
    };
    let cases: Vec<(Value, &str)> = vec![
        (without("queue"), "queue"),
        (with("queue", json!("nowhere")), "queue"),
        (with("queue", json!(7)), "queue"),
        (without("kind"), "kind"),
        (with("kind", json!("email.send")), "kind"),
        (without("payload"), "payload"),
        (with("payload", json!("post it")), "payload"),
        (
            with(
                "payload",
                json!({"api": "nowhere", "method": "GET", "path": "/x"}),
            ),
            "payload.api",
        ),
        (
            with(
                "payload",
                json!({"api": "slack", "method": "BREW", "path": "/x"}),
            ),
            "payload.method",
        ),
        (
            discord(json!({"guild_id": "not-a-snowflake", "name": "mod"})),
            "payload.guild_id",
        ),
        (with("max_attempts", json!(-1)), "max_attempts"),
        (with("max_attempts", json!(0)), "max_attempts"),
        (with("max_attempts", json!(1000)), "max_attempts"),
        (with("priority", json!("high")), "priority"),
        (with("run_at", json!(-5)), "run_at"),
        (with("run_at", json!("tomorrow")), "run_at"),
        (with("group", json!("")), "group"),
        (with("group", json!("g".repeat(201))), "group"),
        (with("idempotency_key", json!("")), "idempotency_key"),
    ];
    for (body, field) in cases {
        let res = enqueue(&h, "acme", &body).await;
        let e = expect_error(res, 400, "invalid_request").await;
        assert_eq!(e["param"], field, "{body} → {e}");
        assert!(e["message"].as_str().unwrap().contains(field), "{e}");
    }

    // An unknown field is named in the message.
    let res = enqueue(&h, "acme", &with("colour", json!("red"))).await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("colour"), "{e}");

    // Malformed JSON.
    let res = h
        .http
        .post(h.url("/v1/jobs"))
        .header("content-type", "application/json")
        .body("{\"queue\": ")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("JSON"), "{e}");

    // A batch names the index of the bad job.
    let batch = json!({"jobs": [job.clone(), job.clone(), with("kind", json!("nope"))]});
    let res = h.send("/v1/jobs/batch", &batch).await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "jobs[2].kind", "{e}");
    let bad_role = discord(json!({"guild_id": "x", "name": "mod"}));
    let batch = json!({"jobs": [job.clone(), job.clone(), job.clone(), bad_role]});
    let res = h.send("/v1/jobs/batch", &batch).await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "jobs[3].payload.guild_id", "{e}");
    let res = h.send("/v1/jobs/batch", &json!({"jobs": []})).await;
    assert_eq!(
        expect_error(res, 400, "invalid_request").await["param"],
        "jobs"
    );
    let res = h.send("/v1/jobs/batch", &json!({})).await;
    assert_eq!(
        expect_error(res, 400, "invalid_request").await["param"],
        "jobs"
    );
    let res = h
        .post("/v1/jobs/batch", &json!({"jobs": [job.clone()]}))
        .header("idempotency-key", "one-for-all")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "idempotency-key");
    let too_many = json!({"jobs": vec![job.clone(); 1_001]});
    let res = h.send("/v1/jobs/batch", &too_many).await;
    assert_eq!(
        expect_error(res, 400, "invalid_request").await["param"],
        "jobs"
    );

    // The list's filters, and ids.
    for (query, field) in [
        ("state=finished", "state"),
        ("cursor=abc", "cursor"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("colour=red", "colour"),
    ] {
        let res = get(&h, &format!("/v1/jobs?{query}"), "acme").await;
        let e = expect_error(res, 400, "invalid_request").await;
        assert_eq!(e["param"], field, "{query} → {e}");
    }
    let res = get(&h, "/v1/jobs/abc", "acme").await;
    assert_eq!(
        expect_error(res, 400, "invalid_request").await["param"],
        "id"
    );

    // A header that contradicts the body.
    let res = h
        .post("/v1/jobs", &with("idempotency_key", json!("a")))
        .header("idempotency-key", "b")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "idempotency-key");

    // Nothing was stored by any of them.
    let page = ok_json(get(&h, "/v1/jobs", "acme").await).await;
    assert_eq!(ids(&page), Vec::<i64>::new());
    h.stop().await;
}

#[tokio::test]
async fn unknown_jobs_are_404_and_invalid_transitions_409() {
    let h = api_only(|_| {}).await;
    expect_error(get(&h, "/v1/jobs/999999", "acme").await, 404, "not_found").await;
    expect_error(
        post(&h, "/v1/jobs/999999/retry", "acme").await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        post(&h, "/v1/jobs/999999/cancel", "acme").await,
        404,
        "not_found",
    )
    .await;

    let id = created(&h, "acme", &http_job("default")).await["id"]
        .as_i64()
        .unwrap();
    // Only a dead job can be retried.
    let e = expect_error(
        post(&h, &format!("/v1/jobs/{id}/retry"), "acme").await,
        409,
        "conflict",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("available"), "{e}");
    let cancelled = ok_json(post(&h, &format!("/v1/jobs/{id}/cancel"), "acme").await).await;
    assert_eq!(cancelled["state"], "cancelled");
    // A cancelled job cannot be cancelled again.
    expect_error(
        post(&h, &format!("/v1/jobs/{id}/cancel"), "acme").await,
        409,
        "conflict",
    )
    .await;
    // Queue-wide calls on an unknown queue.
    expect_error(
        post(&h, "/v1/queues/nowhere/pause", OPS).await,
        404,
        "not_found",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_batch_is_stored_whole_or_not_at_all() {
    let h = api_only(|_| {}).await;
    let mut keyed = discord(json!({"guild_id": "81384788765712384", "name": "mod"}));
    keyed["idempotency_key"] = json!("batch-key");
    let batch = json!({"jobs": [http_job("default"), keyed.clone(), keyed]});
    let res = h
        .post("/v1/jobs/batch", &batch)
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let body: Value = res.json().await.unwrap();
    let jobs = body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0]["idempotent_replay"], false);
    assert_eq!(jobs[1]["idempotent_replay"], false);
    // The same key twice in one batch: the second is the first.
    assert_eq!(jobs[2]["idempotent_replay"], true);
    assert_eq!(jobs[2]["id"], jobs[1]["id"]);
    assert_eq!(jobs[1]["queue"], "discord");

    let bad = json!({"jobs": [http_job("default"), http_job("nowhere")]});
    let res = h
        .post("/v1/jobs/batch", &bad)
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(
        expect_error(res, 400, "invalid_request").await["param"],
        "jobs[1].queue"
    );
    let page = ok_json(get(&h, "/v1/jobs", "acme").await).await;
    assert_eq!(ids(&page).len(), 2, "the bad batch stored nothing");
    h.stop().await;
}

#[tokio::test]
async fn queues_pause_resume_and_count_by_state() {
    let h = api_only(|_| {}).await;
    for _ in 0..3 {
        created(&h, "acme", &http_job("default")).await;
    }
    let q = queue(&h, "default").await;
    assert_eq!(q["paused"], false);
    assert_eq!(q["counts"]["available"], 3);
    assert_eq!(q["total"], 3);
    // Configured queues are listed even when empty.
    let discord = queue(&h, "discord").await;
    assert_eq!(discord["total"], 0);

    let res = ok_json(post(&h, "/v1/queues/default/pause", OPS).await).await;
    assert_eq!(res["paused"], true);
    assert_eq!(queue(&h, "default").await["paused"], true);
    // A paused queue gives nothing to a worker.
    let store = same_store(&h).await;
    assert_eq!(kill_all(&store, "default").await, 0);
    ok_json(post(&h, "/v1/queues/default/resume", OPS).await).await;
    assert_eq!(queue(&h, "default").await["paused"], false);
    assert_eq!(kill_all(&store, "default").await, 3);
    let q = queue(&h, "default").await;
    assert_eq!(
        (
            q["counts"]["available"].as_u64(),
            q["counts"]["dead"].as_u64()
        ),
        (Some(0), Some(3))
    );
    store.close().await;
    h.stop().await;
}

#[tokio::test]
async fn dead_letters_are_retried_one_by_one_or_all_and_purged() {
    let h = api_only(|_| {}).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(
            created(&h, "acme", &http_job("default")).await["id"]
                .as_i64()
                .unwrap(),
        );
    }
    let store = same_store(&h).await;
    assert_eq!(kill_all(&store, "default").await, 4);

    let dead = ok_json(get(&h, &format!("/v1/jobs/{}", ids[0]), "acme").await).await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["attempts"], 1);
    assert_eq!(dead["last_error"], "400 from upstream");
    let page = ok_json(get(&h, "/v1/jobs?state=dead", "acme").await).await;
    assert_eq!(page["jobs"].as_array().unwrap().len(), 4);

    // One by one.
    let again = ok_json(post(&h, &format!("/v1/jobs/{}/retry", ids[0]), "acme").await).await;
    assert_eq!(
        (again["state"].as_str(), again["attempts"].as_u64()),
        (Some("available"), Some(0))
    );
    // All of a queue.
    let res = ok_json(post(&h, "/v1/queues/default/dead/retry", OPS).await).await;
    assert_eq!(res["retried"], 3);
    assert_eq!(queue(&h, "default").await["counts"]["available"], 4);
    // Dead again, then purged.
    assert_eq!(kill_all(&store, "default").await, 4);
    let res = h
        .http
        .delete(h.url("/v1/queues/default/dead"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(ok_json(res).await["purged"], 4);
    assert_eq!(queue(&h, "default").await["total"], 0);
    expect_error(
        get(&h, &format!("/v1/jobs/{}", ids[0]), "acme").await,
        404,
        "not_found",
    )
    .await;
    store.close().await;
    h.stop().await;
}

#[tokio::test]
async fn queue_wide_calls_take_the_admin_token() {
    let h = api_only(|_| {}).await;
    expect_error(
        post(&h, "/v1/queues/default/pause", "acme").await,
        401,
        "invalid_api_key",
    )
    .await;
    let res = h
        .http
        .post(h.url("/v1/queues/default/pause"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    expect_error(res, 403, "forbidden").await;
    for path in [
        "/v1/queues/default/pause",
        "/v1/queues/default/resume",
        "/v1/queues/default/dead/retry",
    ] {
        let res = h
            .http
            .post(h.url(path))
            .bearer_auth("s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
    }
    let res = h
        .http
        .get(h.url("/v1/queues"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // A tenant's own calls need no admin token.
    created(&h, "acme", &http_job("default")).await;
    h.stop().await;
}

#[tokio::test]
async fn metrics_count_enqueues_and_show_jobs_by_queue_and_state() {
    let h = api_only(|c| {
        c.jobs
            .queues
            .insert("metrics-q".into(), QueueSettings::default());
    })
    .await;
    for _ in 0..2 {
        created(&h, "acme", &http_job("metrics-q")).await;
    }
    let text = h.metrics().await;
    assert!(
        text.contains("sluice_jobs_enqueued_total{queue=\"metrics-q\",kind=\"http\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("sluice_jobs{queue=\"metrics-q\",state=\"available\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("sluice_jobs{queue=\"metrics-q\",state=\"dead\"} 0"),
        "{text}"
    );
    h.stop().await;
}

#[tokio::test]
async fn jobs_survive_a_restart_of_the_gateway() {
    let dir = std::env::temp_dir().join(format!("sluice-jobs-restart-{}", fastrand::u64(..)));
    let data = dir.clone();
    let h = api_only(|c| c.data_dir = data.clone()).await;
    let id = created(&h, "acme", &http_job("default")).await["id"]
        .as_i64()
        .unwrap();
    h.stop().await;
    let data = dir.clone();
    let h = api_only(|c| c.data_dir = data).await;
    let read = ok_json(get(&h, &format!("/v1/jobs/{id}"), "acme").await).await;
    assert_eq!(read["state"], "available");
    h.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn with_jobs_disabled_the_api_says_so_and_the_gateway_is_ready() {
    let h = api_only(|c| c.jobs.enabled = false).await;
    let e = expect_error(
        enqueue(&h, "acme", &http_job("default")).await,
        404,
        "not_found",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("disabled"), "{e}");
    assert_eq!(
        h.get("/readyz").send().await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        h.get("/metrics").send().await.unwrap().status(),
        StatusCode::OK
    );
    assert!(!h.data_dir.join("jobs.db").exists());
    h.stop().await;
}

#[tokio::test]
async fn a_store_that_cannot_open_stops_the_start_naming_its_path() {
    let dir = std::env::temp_dir().join(format!("sluice-jobs-bad-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    // The data directory is a file: jobs.db cannot be made under it.
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let mut config = Config {
        data_dir: file.clone(),
        ..Config::default()
    };
    config.trace.enabled = false;
    let e = sluice_gateway::Gateway::bind(config, Some("127.0.0.1:0".parse().unwrap()))
        .await
        .expect_err("the start fails");
    let shown = e.to_string();
    assert!(shown.contains("job store"), "{shown}");
    assert!(shown.contains("not-a-dir"), "{shown}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn with_tenant_keys_jobs_belong_to_the_key() {
    let h = api_only(|c| {
        for (name, key) in [("acme", "key-acme"), ("globex", "key-globex")] {
            c.tenants.push(TenantConfig::new(name, key));
        }
    })
    .await;
    let res = h
        .post("/v1/jobs", &http_job("default"))
        .send()
        .await
        .unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    let res = h
        .post("/v1/jobs", &http_job("default"))
        .bearer_auth("key-acme")
        .header("x-sluice-workspace", "globex")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let job: Value = res.json().await.unwrap();
    assert_eq!(
        job["tenant"], "acme",
        "the key names the tenant, not the header"
    );
    let id = job["id"].as_i64().unwrap();
    let read = |key: &'static str| h.get(&format!("/v1/jobs/{id}")).bearer_auth(key).send();
    assert_eq!(read("key-acme").await.unwrap().status(), StatusCode::OK);
    expect_error(read("key-globex").await.unwrap(), 404, "not_found").await;
    // Queue-wide calls are the operator's, never a tenant's.
    let res = h
        .http
        .post(h.url("/v1/queues/default/pause"))
        .send()
        .await
        .unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    let res = h
        .http
        .post(h.url("/v1/queues/default/pause"))
        .bearer_auth("key-globex")
        .send()
        .await
        .unwrap();
    expect_error(res, 403, "forbidden").await;
    h.stop().await;
}

#[tokio::test]
async fn a_job_for_later_is_scheduled_at_its_unix_millisecond() {
    let h = api_only(|_| {}).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut body = http_job("default");
    body["run_at"] = json!(now_ms + 3_600_000);
    body["priority"] = json!(7);
    body["group"] = json!("guild:1");
    body["max_attempts"] = json!(5);
    let job = created(&h, "acme", &body).await;
    assert_eq!(job["state"], "scheduled");
    assert_eq!(job["run_at"], now_ms + 3_600_000);
    assert_eq!(
        (job["priority"].as_i64(), job["max_attempts"].as_u64()),
        (Some(7), Some(5))
    );
    assert_eq!(job["group"], "guild:1");
    // A time already past means now.
    body["run_at"] = json!(0);
    assert_eq!(created(&h, "acme", &body).await["state"], "available");
    h.stop().await;
}

/// The operator's listing (what the job browser reads): every tenant's
/// jobs, filtered by tenant; one job with its timeline; a cancel of any
/// tenant's job, audited as the admin's. A tenant's listing takes no
/// `tenant`, and a bad parameter is a 400 naming it.
#[tokio::test]
async fn the_operator_lists_reads_and_cancels_any_tenants_jobs() {
    let h = api_only(|_| {}).await;
    let a = created(&h, "acme", &http_job("default")).await["id"]
        .as_i64()
        .unwrap();
    let g = created(&h, "globex", &http_job("default")).await["id"]
        .as_i64()
        .unwrap();
    let all = ok_json(get(&h, "/v1/jobs/all", OPS).await).await;
    assert_eq!(ids(&all), vec![a, g]);
    let globex = ok_json(get(&h, "/v1/jobs/all?tenant=globex&state=available", OPS).await).await;
    assert_eq!(ids(&globex), vec![g]);
    let paged = ok_json(get(&h, "/v1/jobs/all?limit=1", OPS).await).await;
    assert_eq!(ids(&paged), vec![a]);
    let next = paged["next_cursor"].as_str().expect("a next page");
    let rest = ok_json(get(&h, &format!("/v1/jobs/all?limit=1&cursor={next}"), OPS).await).await;
    assert_eq!(ids(&rest), vec![g]);
    // A tenant cannot ask for another's, nor reach the operator's routes.
    let e = expect_error(
        get(&h, "/v1/jobs?tenant=globex", "acme").await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(e["param"], "tenant");
    assert!(
        [401, 403].contains(&get(&h, "/v1/jobs/all", "acme").await.status().as_u16()),
        "a tenant is refused the operator's listing"
    );
    let e = expect_error(
        get(&h, "/v1/jobs/all?colour=red", OPS).await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(e["param"], "colour");
    let long = "q".repeat(201);
    let e = expect_error(
        get(&h, &format!("/v1/jobs/all?queue={long}"), OPS).await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(e["param"], "queue");
    expect_error(
        get(&h, "/v1/jobs/all/abc", OPS).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(get(&h, "/v1/jobs/all/999999", OPS).await, 404, "not_found").await;

    // One job, with its timeline.
    let job = ok_json(get(&h, &format!("/v1/jobs/all/{g}"), OPS).await).await;
    assert_eq!(job["tenant"], "globex");
    assert_eq!(job["payload"]["api"], "slack");
    let events: Vec<&str> = job["timeline"]
        .as_array()
        .expect("a timeline")
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["enqueued"]);
    // A tenant's own read has no timeline (the operator's browser has).
    let own = ok_json(get(&h, &format!("/v1/jobs/{g}"), "globex").await).await;
    assert!(own.get("timeline").is_none(), "{own}");

    // The operator cancels globex's job; the trail says so.
    let res = ok_json(post(&h, &format!("/v1/jobs/all/{g}/cancel"), OPS).await).await;
    assert_eq!(res["state"], "cancelled");
    expect_error(
        post(&h, &format!("/v1/jobs/all/{g}/cancel"), OPS).await,
        409,
        "conflict",
    )
    .await;
    expect_error(
        post(&h, &format!("/v1/jobs/all/{a}/retry"), OPS).await,
        409,
        "conflict",
    )
    .await;
    let target = g.to_string();
    let entry = common::wait_for("the cancel is audited", || async {
        let trail = ok_json(get(&h, "/v1/audit?kind=job.cancel", OPS).await).await;
        trail["entries"].as_array().and_then(|e| {
            e.iter()
                .find(|e| e["target"].as_str() == Some(target.as_str()))
                .cloned()
        })
    })
    .await;
    assert_eq!(entry["actor"], "admin", "{entry}");
    assert_eq!(entry["after"]["tenant"], "globex", "{entry}");
    let mine = ok_json(get(&h, &format!("/v1/jobs/{a}"), "acme").await).await;
    assert_eq!(mine["state"], "available", "acme's job is untouched");
}
