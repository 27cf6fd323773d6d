//! The audit trail through the gateway's HTTP API: every administrative
//! act recorded with who, what, before and after, in the request that
//! made it; capacity reductions credited to the reporter or the upstream;
//! `GET /v1/audit` with its filters and paging, refusing bad parameters
//! by name; entries written out at shutdown; the same on PostgreSQL.

mod common;

use common::{Harness, chat, fresh_database, header, postgres_server, sim_config, wait_for};
use reqwest::Method;
use serde_json::{Value, json};
use sluice_audit::{AuditStore, Filter};
use sluice_sim::{Faults, Scope};

const ADMIN: &str = "the-operator";

/// `method path` with `body`, as `bearer`: the answer.
async fn call(
    h: &Harness,
    bearer: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = h.http.request(method, h.url(path)).bearer_auth(bearer);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.expect("the gateway answers")
}

/// As [`call`], expecting `status`: the JSON answer and its request id.
async fn ok(
    h: &Harness,
    bearer: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> (Value, String) {
    let res = call(h, bearer, method.clone(), path, body).await;
    assert_eq!(res.status().as_u16(), status, "{method} {path}");
    let id = header(&res, "x-request-id");
    (res.json().await.expect("JSON"), id)
}

/// `GET /v1/audit?{query}` as the operator: the entries, and the answer.
async fn audit(h: &Harness, query: &str) -> (Vec<Value>, Value) {
    let (body, _) = ok(
        h,
        ADMIN,
        Method::GET,
        &format!("/v1/audit?{query}"),
        None,
        200,
    )
    .await;
    let entries = body["entries"].as_array().expect("entries").clone();
    (entries, body)
}

/// The entries of `query`, once there are at least `n` (the writer is
/// behind the answers by a batch).
async fn at_least(h: &Harness, query: &str, n: usize) -> Vec<Value> {
    wait_for(&format!("{n} audit entries for {query:?}"), || async {
        let (entries, _) = audit(h, query).await;
        (entries.len() >= n).then_some(entries)
    })
    .await
}

fn find<'a>(entries: &'a [Value], kind: &str, target: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["kind"] == kind && e["target"] == target)
        .unwrap_or_else(|| panic!("no {kind} of {target} in {entries:#?}"))
}

fn http_job() -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": "hi"}}
    })
}

/// Every kind of act on one gateway, by the operator and by a key; each
/// is found with its actor, before and after, and the request id its
/// answer carried. Returns the harness for more.
async fn act_on_everything(h: &Harness) {
    use Method as M;
    // Limits at run time.
    let (_, limit_req) = ok(
        h,
        ADMIN,
        M::PUT,
        "/v1/limits/api:slack",
        Some(json!({"capacity": 7})),
        200,
    )
    .await;
    // Tiers, tenants, keys.
    ok(
        h,
        ADMIN,
        M::POST,
        "/v1/tiers",
        Some(json!({"name": "free", "limits": {"requests_per_minute": 60}})),
        201,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::PUT,
        "/v1/tiers/free",
        Some(json!({"limits": {"requests_per_minute": 30}})),
        200,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::POST,
        "/v1/tenants",
        Some(json!({"name": "acme", "tier": "free"})),
        201,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::PATCH,
        "/v1/tenants/acme",
        Some(json!({"tags": ["team-a"]})),
        200,
    )
    .await;
    let (issued, _) = ok(
        h,
        ADMIN,
        M::POST,
        "/v1/keys",
        Some(json!({"tenant": "acme", "name": "bot"})),
        201,
    )
    .await;
    let key_id = issued["id"].as_str().expect("key id").to_owned();
    ok(
        h,
        ADMIN,
        M::PATCH,
        &format!("/v1/keys/{key_id}"),
        Some(json!({"tags": ["x"]})),
        200,
    )
    .await;
    let (rotated, _) = ok(
        h,
        ADMIN,
        M::POST,
        &format!("/v1/keys/{key_id}/rotate"),
        None,
        201,
    )
    .await;
    let new_id = rotated["id"].as_str().unwrap().to_owned();
    let secret = rotated["key"].as_str().unwrap().to_owned();
    ok(
        h,
        ADMIN,
        M::POST,
        &format!("/v1/keys/{new_id}/block"),
        None,
        200,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::POST,
        &format!("/v1/keys/{new_id}/unblock"),
        None,
        200,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::POST,
        &format!("/v1/keys/{key_id}/revoke"),
        None,
        200,
    )
    .await;
    ok(h, ADMIN, M::POST, "/v1/tenants/acme/block", None, 200).await;
    ok(h, ADMIN, M::POST, "/v1/tenants/acme/unblock", None, 200).await;
    // Queues and dead letters.
    ok(h, ADMIN, M::POST, "/v1/queues/default/pause", None, 200).await;
    ok(h, ADMIN, M::POST, "/v1/queues/default/resume", None, 200).await;
    ok(h, ADMIN, M::DELETE, "/v1/queues/default/dead", None, 200).await;
    ok(
        h,
        ADMIN,
        M::POST,
        "/v1/queues/default/dead/retry",
        None,
        200,
    )
    .await;
    ok(
        h,
        ADMIN,
        M::DELETE,
        "/v1/cache?model=openai/gpt-4o",
        None,
        200,
    )
    .await;
    // The new key cancels its own job and reports a 429.
    let (job, _) = ok(h, &secret, M::POST, "/v1/jobs", Some(http_job()), 201).await;
    let job_id = job["id"].as_i64().expect("job id");
    let res = h
        .http
        .post(h.url(&format!("/v1/jobs/{job_id}/cancel")))
        .bearer_auth(&secret)
        .header("x-request-id", "cancel-by-the-bot")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(header(&res, "x-request-id"), "cancel-by-the-bot");
    let (grant, _) = ok(
        h,
        &secret,
        M::POST,
        "/v1/limits/acquire",
        Some(json!({"model": "openai/gpt-4o"})),
        200,
    )
    .await;
    ok(
        h,
        &secret,
        M::POST,
        "/v1/limits/report",
        Some(json!({"grant_id": grant["grant_id"], "status": 429, "retry_after": "1"})),
        200,
    )
    .await;

    let entries = at_least(h, "limit=1000", 20).await;
    let e = find(&entries, "limit.set", "api:slack");
    assert_eq!(e["actor"], "admin");
    assert_eq!(e["after"]["capacity"], 7, "{e}");
    assert_eq!(e["request_id"], limit_req.as_str(), "the answer's id: {e}");
    assert!(e["at"].as_str().unwrap().ends_with('Z'), "{e}");
    let e = find(&entries, "tier.update", "free");
    assert_eq!(e["before"]["limits"]["requests_per_minute"], 60, "{e}");
    assert_eq!(e["after"]["limits"]["requests_per_minute"], 30, "{e}");
    find(&entries, "tier.create", "free");
    find(&entries, "tenant.create", "acme");
    let e = find(&entries, "tenant.update", "acme");
    assert_eq!(e["after"]["tags"], json!(["team-a"]), "{e}");
    let e = find(&entries, "key.issue", &key_id);
    assert!(
        e["after"].get("key").is_none(),
        "the secret is never kept: {e}"
    );
    assert!(!e.to_string().contains("sk-sluice-"), "{e}");
    find(&entries, "key.update", &key_id);
    let e = find(&entries, "key.rotate", &key_id);
    assert_eq!(e["after"]["id"], new_id.as_str(), "{e}");
    assert!(!e.to_string().contains(&secret), "{e}");
    let e = find(&entries, "key.block", &new_id);
    assert_ne!(e["before"]["state"], e["after"]["state"], "{e}");
    find(&entries, "key.unblock", &new_id);
    let e = find(&entries, "key.revoke", &key_id);
    assert_eq!(e["after"]["state"], "revoked", "{e}");
    find(&entries, "tenant.block", "acme");
    find(&entries, "tenant.unblock", "acme");
    assert_eq!(
        find(&entries, "queue.pause", "default")["after"]["paused"],
        true
    );
    assert_eq!(
        find(&entries, "queue.resume", "default")["after"]["paused"],
        false
    );
    assert_eq!(
        find(&entries, "dead.purge", "default")["after"]["purged"],
        0
    );
    find(&entries, "dead.retry", "default");
    let e = find(&entries, "cache.purge", "cache");
    assert_eq!(e["after"]["filter"]["model"], "openai/gpt-4o", "{e}");
    let by_key = format!("key:{new_id}");
    let e = find(&entries, "job.cancel", &job_id.to_string());
    assert_eq!(e["actor"], by_key.as_str(), "{e}");
    assert_eq!(e["request_id"], "cancel-by-the-bot", "{e}");
    assert_eq!(
        (e["before"]["state"].as_str(), e["after"]["state"].as_str()),
        (Some("available"), Some("cancelled")),
        "{e}"
    );
    // A tenant's report alone pauses only its own acquires (issue 33):
    // recorded as the key's, with what it did.
    let e = find(&entries, "limit.report", "openai/gpt-4o");
    assert_eq!(e["actor"], by_key.as_str(), "the reporter: {e}");
    assert_eq!(e["after"]["status"], 429, "{e}");
    assert_eq!(e["after"]["applied"], "own", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_administrative_act_is_recorded_on_sqlite() {
    let h = Harness::with(sim_config(), |c| {
        c.admin_token = Some(ADMIN.into());
        c.jobs.workers = false;
    })
    .await;
    act_on_everything(&h).await;
    assert!(h.data_dir.join("audit.db").exists(), "beside jobs.db");

    // Filters: actor, kind (exact or up to a dot), time, and paging.
    let (all, _) = audit(&h, "limit=1000").await;
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let (admin, _) = audit(&h, "actor=admin&limit=1000").await;
    assert!(admin.iter().all(|e| e["actor"] == "admin"));
    assert_eq!(admin.len(), all.len() - 2, "all but the key's two acts");
    let (keys, _) = audit(&h, "kind=key").await;
    assert_eq!(keys.len(), 6, "{keys:#?}");
    assert!(
        keys.iter()
            .all(|e| e["kind"].as_str().unwrap().starts_with("key."))
    );
    let (revokes, _) = audit(&h, "kind=key.revoke").await;
    assert_eq!(revokes.len(), 1);
    let at = all[3]["at_ms"].as_i64().unwrap();
    let (since, _) = audit(&h, &format!("from={at}&limit=1000")).await;
    assert!(since.len() >= 4 && since.iter().all(|e| e["at_ms"].as_i64().unwrap() >= at));
    let (before, _) = audit(&h, &format!("to={at}&limit=1000")).await;
    assert_eq!(since.len() + before.len(), all.len());
    let (none, _) = audit(&h, "from=2001-01-01T00:00:00Z&to=2001-01-02T00:00:00Z").await;
    assert!(none.is_empty());
    let (page1, body) = audit(&h, "limit=10").await;
    assert_eq!(page1.len(), 10);
    let next = body["next_before"].as_i64().expect("a next page");
    let (page2, _) = audit(&h, &format!("limit=10&before={next}")).await;
    assert_eq!(page2[0]["id"].as_i64().unwrap(), ids[10]);

    // Bad parameters are named; the trail is the operator's.
    for (q, param) in [
        ("from=last-tuesday", "from"),
        ("limit=5000", "limit"),
        ("before=x", "before"),
        ("actor=", "actor"),
        ("who=admin", "who"),
    ] {
        let res = call(&h, ADMIN, Method::GET, &format!("/v1/audit?{q}"), None).await;
        assert_eq!(res.status().as_u16(), 400, "{q}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["param"], param, "{q}: {body}");
    }
    let res = h.get("/v1/audit").send().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_429_is_a_reduction_by_the_upstream() {
    let h = Harness::with(sim_config(), |c| c.admin_token = Some(ADMIN.into())).await;
    let faults = Faults {
        force_429: true,
        force_429_retry_after_ms: 60_000,
        ..Faults::none()
    };
    h.sim
        .set_faults(Scope::Model("busy".into()), faults)
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/busy")).await;
    assert_eq!(res.status().as_u16(), 429);
    let entries = at_least(&h, "kind=capacity", 1).await;
    let e = find(&entries, "capacity.reduce", "openai/busy");
    assert_eq!(e["actor"], "upstream", "{e}");
    assert_eq!(e["after"]["reason"], "throttled", "{e}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_queued_at_shutdown_are_written_out() {
    let mut h = Harness::with(sim_config(), |c| c.admin_token = Some(ADMIN.into())).await;
    for n in 1..=50u64 {
        let res = call(
            &h,
            ADMIN,
            Method::PUT,
            "/v1/limits/api:github",
            Some(json!({"capacity": n})),
        )
        .await;
        assert_eq!(res.status().as_u16(), 200);
    }
    // No waiting for the writer: shutdown drains it.
    h.shutdown().await;
    let store = AuditStore::open(h.data_dir.join("audit.db")).await.unwrap();
    let entries = store
        .query(&Filter {
            kind: Some("limit.set".into()),
            limit: 1_000,
            ..Filter::default()
        })
        .await
        .unwrap();
    let caps: Vec<u64> = entries
        .iter()
        .map(|e| e.after.as_ref().unwrap()["capacity"].as_u64().unwrap())
        .collect();
    assert_eq!(caps, (1..=50).rev().collect::<Vec<_>>());
    store.close().await;
    h.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_administrative_act_is_recorded_on_postgresql() {
    let Some(server) = postgres_server("the PostgreSQL audit trail test") else {
        return;
    };
    let db = fresh_database(&server, "audit_api").await;
    let store_url = db.url.clone();
    let h = Harness::with(sim_config(), move |c| {
        c.admin_token = Some(ADMIN.into());
        c.jobs.workers = false;
        c.jobs.store = store_url;
    })
    .await;
    act_on_everything(&h).await;
    assert!(!h.data_dir.join("audit.db").exists(), "no SQLite file");
    let (keys, _) = audit(&h, "kind=key&actor=admin").await;
    assert_eq!(keys.len(), 6, "{keys:#?}");
    // The entries are in the jobs' database.
    let store = AuditStore::connect(&db.url).await.unwrap();
    let revokes = store
        .query(&Filter {
            kind: Some("key.revoke".into()),
            ..Filter::default()
        })
        .await
        .unwrap();
    assert_eq!(revokes.len(), 1);
    store.close().await;
    h.stop().await;
}
