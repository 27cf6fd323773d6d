//! Schedules through the API: bad bodies named field by field, a tenant's
//! schedules invisible to another, each change audited, runs that carry
//! their schedule; and on PostgreSQL two gateways firing one schedule,
//! each tick once.

mod common;

use std::collections::BTreeMap;

use common::{Harness, expect_error, postgres_server, sim_config, wait_for};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sluice_jobs::{JobStore, ListFilter, PostgresStore, StoreConfig};

const ADMIN: &str = "s3cret";

fn noop_job() -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": "tick"}}
    })
}

async fn send(
    h: &Harness,
    method: Method,
    path: &str,
    tenant: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut req = h.http.request(method, h.url(path));
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

#[tokio::test]
async fn schedules_are_checked_owned_audited_and_fired() {
    let h = Harness::with(sim_config(), |c| {
        c.jobs.workers = false;
        c.admin_token = Some(ADMIN.into());
    })
    .await;
    let post = |body: Value| {
        let h = &h;
        async move { send(h, Method::POST, "/v1/schedules", "acme", Some(&body)).await }
    };

    // Bad bodies, each naming its field.
    let cases = [
        (json!({"every_ms": 1000, "job": noop_job()}), "name"),
        (
            json!({"name": "a b", "every_ms": 1000, "job": noop_job()}),
            "name",
        ),
        (json!({"name": "r", "job": noop_job()}), "every_ms"),
        (
            json!({"name": "r", "every_ms": 1000, "cron": "* * * * *", "job": noop_job()}),
            "every_ms",
        ),
        (
            json!({"name": "r", "every_ms": 5, "job": noop_job()}),
            "every_ms",
        ),
        (
            json!({"name": "r", "cron": "* * *", "job": noop_job()}),
            "cron",
        ),
        (
            json!({"name": "r", "cron": "0 9 * * *", "tz": "Mars/Olympus", "job": noop_job()}),
            "tz",
        ),
        (
            json!({"name": "r", "every_ms": 1000, "tz": "UTC", "job": noop_job()}),
            "tz",
        ),
        (json!({"name": "r", "every_ms": 1000}), "job"),
        (
            json!({"name": "r", "every_ms": 1000, "job": {"queue": "nope", "kind": "http", "payload": {}}}),
            "job.queue",
        ),
        (
            json!({"name": "r", "every_ms": 1000, "job": {"queue": "default", "kind": "http", "payload": {"api": "slack"}, "run_at": 1}}),
            "job.run_at",
        ),
        (
            json!({"name": "r", "every_ms": 1000, "job": noop_job(), "limit": 0}),
            "limit",
        ),
        (
            json!({"name": "r", "every_ms": 1000, "job": noop_job(), "start_at": 2000, "end_at": 1000}),
            "end_at",
        ),
        (
            json!({"name": "r", "every_ms": 1000, "job": noop_job(), "colour": "red"}),
            "colour",
        ),
    ];
    for (body, field) in cases {
        let err = expect_error(post(body.clone()).await, 400, "invalid_request").await;
        let message = err["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{body}: {err}");
    }

    // Stored (201), stored again (200: replaced), read back.
    let body = json!({"name": "report", "every_ms": 100, "job": noop_job(), "limit": 3});
    let created = json_of(post(body.clone()).await, StatusCode::CREATED).await;
    assert_eq!(created["name"], "report");
    assert_eq!(created["tenant"], "acme");
    let cron =
        json!({"name": "nightly", "cron": "0 3 * * *", "tz": "Europe/Paris", "job": noop_job()});
    let nightly = json_of(post(cron.clone()).await, StatusCode::CREATED).await;
    assert_eq!(nightly["tz"], "Europe/Paris");
    assert!(nightly["next_run_at"].as_i64().is_some(), "{nightly}");
    json_of(post(cron).await, StatusCode::OK).await;

    // Another tenant sees none of them and deletes none.
    let theirs = json_of(
        send(&h, Method::GET, "/v1/schedules", "globex", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(theirs["schedules"], json!([]));
    for method in [Method::GET, Method::DELETE] {
        let res = send(&h, method, "/v1/schedules/report", "globex", None).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
    }

    // Its three runs, each a job of acme's carrying the schedule's name.
    let ids: Vec<i64> = wait_for("three runs of `report`", || async {
        let page = json_of(
            send(&h, Method::GET, "/v1/jobs?limit=100", "acme", None).await,
            StatusCode::OK,
        )
        .await;
        let ids: Vec<i64> = page["jobs"]
            .as_array()?
            .iter()
            .filter_map(|j| j["id"].as_i64())
            .collect();
        (ids.len() >= 3).then_some(ids)
    })
    .await;
    assert_eq!(ids.len(), 3, "the limit holds");
    for id in ids {
        let job = json_of(
            send(&h, Method::GET, &format!("/v1/jobs/{id}"), "acme", None).await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(job["schedule"], "report");
        assert!(job["schedule_tick"].as_i64().is_some(), "{job}");
    }
    let report = json_of(
        send(&h, Method::GET, "/v1/schedules/report", "acme", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (report["runs"].clone(), report["next_run_at"].clone()),
        (json!(3), Value::Null)
    );

    // Deleted once; then gone.
    let res = send(&h, Method::DELETE, "/v1/schedules/nightly", "acme", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = send(&h, Method::DELETE, "/v1/schedules/nightly", "acme", None).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    // Every change is in the audit trail, with the tenant as its actor.
    let kinds = wait_for("the schedules' audit entries", || async {
        let body = json_of(
            send(&h, Method::GET, "/v1/audit?limit=100", "ops", None).await,
            StatusCode::OK,
        )
        .await;
        let kinds: Vec<(String, String)> = body["entries"]
            .as_array()?
            .iter()
            .filter(|e| {
                e["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("schedule."))
            })
            .map(|e| {
                (
                    e["kind"].as_str().unwrap_or_default().to_owned(),
                    e["target"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        (kinds.len() >= 4).then_some(kinds)
    })
    .await;
    for (kind, target) in [
        ("schedule.put", "report"),
        ("schedule.put", "nightly"),
        ("schedule.delete", "nightly"),
    ] {
        assert!(
            kinds.iter().any(|(k, t)| k == kind && t == target),
            "{kind} {target}: {kinds:?}"
        );
    }
}

/// Two gateways on one PostgreSQL database fire one schedule every second:
/// every tick enqueues exactly one job, and at least three ticks fire.
#[tokio::test]
async fn two_gateways_fire_each_tick_once() {
    let Some(server) = postgres_server("the two-gateway schedule test") else {
        return;
    };
    let db = common::fresh_database(&server, "schedules").await;
    let url = db.url.clone();
    let edit = |c: &mut sluice_gateway::config::Config, url: String| {
        c.jobs.workers = false;
        c.jobs.store = url;
    };
    let h = Harness::with(sim_config(), |c| edit(c, url.clone())).await;
    let replica = h.replica(|c| edit(c, url.clone())).await;

    let body = json!({"name": "every-second", "every_ms": 1000, "job": noop_job()});
    let res = h
        .http
        .post(replica.url("/v1/schedules"))
        .header("x-sluice-workspace", "acme")
        .json(&body)
        .send()
        .await
        .expect("the replica answers");
    assert_eq!(res.status(), StatusCode::CREATED);

    let store = PostgresStore::connect(&url, StoreConfig::default())
        .await
        .expect("the test's own store");
    let per_tick: BTreeMap<i64, usize> = wait_for("three ticks fired", || async {
        let page = store.list(&ListFilter::default()).await.ok()?;
        if page.jobs.len() < 3 {
            return None;
        }
        let mut per_tick = BTreeMap::new();
        for summary in &page.jobs {
            let job = store.get(summary.id).await.ok()??;
            assert_eq!(job.schedule.as_deref(), Some("every-second"));
            *per_tick.entry(job.schedule_tick?.as_millis()).or_insert(0) += 1;
        }
        (per_tick.len() >= 3).then_some(per_tick)
    })
    .await;
    assert!(
        per_tick.values().all(|n| *n == 1),
        "a tick fired twice: {per_tick:?}"
    );
    let ticks: Vec<i64> = per_tick.keys().copied().collect();
    assert!(
        ticks.windows(2).all(|w| (w[1] - w[0]) % 1000 == 0),
        "ticks on the schedule's grid: {ticks:?}"
    );
    store.close().await;
    drop(replica);
}
