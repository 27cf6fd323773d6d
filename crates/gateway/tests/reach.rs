//! Issue 33, what a tenant may name and reach: the limiter API resolves
//! only configured models and APIs (their `tokens:`/`inflight:`) and the
//! caller's own sessions; one tenant's 429 report pauses only its own
//! acquires until another tenant agrees, is rate-limited and audited;
//! names are bounded before any state is made of them; `GET /v1/limits`
//! shows no other tenant's job groups; `high` priority is a permission.

mod common;

use common::{ACME, GLOBEX, ModelLimits, expect_error, model_limits, sim_config};
use proptest::strategy::{Strategy, ValueTree};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::Config;

const ADMIN: &str = "the-operator";
const MODEL: &str = "openai/gpt-4o-mini";

fn setup(c: &mut Config) {
    common::two_tenants(c);
    c.admin_token = Some(ADMIN.into());
    c.models.push(ModelLimits {
        requests_per_second: 5.0,
        burst: 5,
        max_in_flight: Some(4),
        ..model_limits(MODEL)
    });
}

async fn harness(edit: impl FnOnce(&mut Config)) -> common::Harness {
    common::Harness::with(sim_config(), |c| {
        setup(c);
        edit(c);
    })
    .await
}

async fn post(h: &common::Harness, path: &str, key: &str, body: Value) -> reqwest::Response {
    h.post(path, &body)
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

async fn grant(h: &common::Harness, key: &str, body: Value) -> Value {
    let res = post(h, "/v1/limits/acquire", key, body).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_resolve_only_configured_models_apis_and_own_sessions() {
    let h = harness(|_| {}).await;
    // What the issue acquired: the queues' and other tenants' job groups,
    // any in-flight or token resource, the callers' own limits.
    for resource in [
        "jobs:default",
        "jobs:default:globex:default",
        "inflight:whatever",
        "tokens:whatever",
        "tokens:api:slack",
        "caller:tenant:globex:rpm",
        "nothing-known",
        "api:nope",
    ] {
        let res = post(
            &h,
            "/v1/limits/acquire",
            ACME,
            json!({ "resource": resource }),
        )
        .await;
        let e = expect_error(res, 404, "not_found").await;
        assert!(
            e["message"].as_str().unwrap().contains("unknown resource"),
            "{resource}: {e}"
        );
    }
    // A model under a dot segment is not one model name.
    let res = post(
        &h,
        "/v1/limits/acquire",
        ACME,
        json!({"model": "openai/cheap/../gpt-4o"}),
    )
    .await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "model", "{e}");
    // What it may name: a configured model, its tokens and in-flight
    // resources, an API, its own session.
    for resource in [
        MODEL,
        "inflight:openai/gpt-4o-mini",
        "tokens:openai/gpt-4o-mini",
        "api:slack",
        "inflight:api:slack",
        "session:mine",
    ] {
        let g = grant(&h, ACME, json!({ "resource": resource })).await;
        assert_eq!(g["resource"], resource);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_429_pauses_only_itself_until_another_agrees() {
    let h = harness(|c| c.adaptive.max_pause_seconds = 60).await;
    let report = |g: &Value| json!({"grant_id": g["grant_id"], "status": 429, "retry_after": "60"});
    let g = grant(&h, ACME, json!({ "model": MODEL })).await;
    let res = post(&h, "/v1/limits/report", ACME, report(&g)).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["applied"], "own", "{body}");
    assert_eq!(body["reduced"], false, "{body}");
    assert!(body["own_pause_ms"].as_u64().unwrap() > 50_000, "{body}");
    // globex calls the model at once, by the gateway and by the API.
    let res = h
        .post("/v1/chat/completions", &common::chat(MODEL))
        .bearer_auth(GLOBEX)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let theirs = grant(&h, GLOBEX, json!({ "model": MODEL })).await;
    // acme's own acquires wait out what it reported.
    let res = post(&h, "/v1/limits/acquire", ACME, json!({ "model": MODEL })).await;
    let e = expect_error(res, 429, "rate_limited").await;
    assert!(e["message"].as_str().unwrap().contains(MODEL), "{e}");
    // A second tenant agreeing is taken on the shared resource.
    let res = post(&h, "/v1/limits/report", GLOBEX, report(&theirs)).await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["applied"], "shared", "{body}");
    assert_eq!(body["reduced"], true, "{body}");
    // Both reports are in the audit trail, with what they did (written
    // in the background: waited for).
    common::wait_until("both reports in the audit trail", || async {
        let audit = h.get_json("/v1/audit?kind=limit.report", ADMIN).await;
        let applied: Vec<(String, String)> = audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["actor"].as_str().unwrap_or_default().to_owned(),
                    e["after"]["applied"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect();
        applied.contains(&("tenant:acme".into(), "own".into()))
            && applied.contains(&("tenant:globex".into(), "shared".into()))
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_are_rate_limited_per_tenant() {
    let h = harness(|c| {
        c.models.push(model_limits("openai/gpt-4o"));
        c.limits_api.max_held_per_tenant = 1_000;
    })
    .await;
    let mut limited = 0;
    for _ in 0..70 {
        let g = grant(&h, ACME, json!({"model": "openai/gpt-4o"})).await;
        let res = post(
            &h,
            "/v1/limits/report",
            ACME,
            json!({"grant_id": g["grant_id"], "status": 200}),
        )
        .await;
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            limited += 1;
        } else {
            assert_eq!(res.status(), StatusCode::OK);
        }
    }
    assert_eq!(limited, 10, "60 reports a minute, then 429");
    // Another tenant's reports are its own count.
    let g = grant(&h, GLOBEX, json!({"model": "openai/gpt-4o"})).await;
    let res = post(
        &h,
        "/v1/limits/report",
        GLOBEX,
        json!({"grant_id": g["grant_id"], "status": 200}),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    h.stop().await;
}

/// Names that must be refused before anything is made of them: too long,
/// not visible ASCII, or not one path segment.
fn hostile_names() -> Vec<String> {
    let long = "[a-z]{257,1024}".prop_map(|s| format!("openai/{s}"));
    let invisible =
        "[a-z]{1,20}[ \t\u{1b}\u{7f}é\u{0}\n][a-z]{0,20}".prop_map(|s| format!("openai/{s}"));
    let dots = "[a-z]{1,8}".prop_map(|s| format!("openai/{s}/../gpt-4o"));
    let strategy = proptest::collection::vec(proptest::prop_oneof![long, invisible, dots], 40);
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    strategy.new_tree(&mut runner).unwrap().current()
}

/// What the gateway keeps per name: limiter resources, and the
/// dashboard's entries (models, lanes).
async fn kept(h: &common::Harness) -> (usize, usize) {
    let limits = h.get_json("/v1/limits", ACME).await;
    let resources = limits["resources"].as_array().unwrap().len();
    let board = h.get_json("/v1/dashboard", ADMIN).await;
    (resources, board.to_string().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_hostile_names_through_every_route_leave_no_state() {
    let h = harness(|_| {}).await;
    // Warm: what an ordinary call leaves.
    let res = h
        .post("/v1/chat/completions", &common::chat(MODEL))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The dashboard samples once a second: wait for one that has the call.
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let before = kept(&h).await;
    for name in hostile_names() {
        let bodies = [
            ("/v1/chat/completions", common::chat(&name)),
            ("/v1/embeddings", json!({"model": name, "input": "x"})),
            ("/v1/responses", json!({"model": name, "input": "x"})),
            (
                "/v1/messages",
                json!({"model": name.replacen("openai/", "anthropic/", 1), "max_tokens": 8,
                       "messages": [{"role": "user", "content": "x"}]}),
            ),
            ("/v1/limits/acquire", json!({ "model": name })),
            ("/v1/limits/acquire", json!({ "resource": name })),
            (
                "/v1/limits/acquire",
                json!({ "resource": format!("tokens:{name}") }),
            ),
        ];
        for (path, body) in bodies {
            let res = post(&h, path, ACME, body).await;
            let status = res.status();
            let e: Value = res.json().await.unwrap();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {name:?}: {e}");
            assert!(
                e["error"]["param"] == "model" || e["error"]["param"] == "resource",
                "{path}: {e}"
            );
            // The refusal does not echo megabytes back.
            assert!(
                e.to_string().len() < 2_000,
                "{path}: {} bytes",
                e.to_string().len()
            );
        }
        let api: String = name.chars().skip(7).take(300).collect();
        let res = h
            .http
            .post(h.url(&format!("/proxy/{}/x", urlencode(&api))))
            .bearer_auth(ACME)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert!(
            matches!(res.status().as_u16(), 400 | 404),
            "/proxy/{api:?}: {}",
            res.status()
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let after = kept(&h).await;
    assert_eq!(after.0, before.0, "limiter resources grew");
    assert!(
        after.1 <= before.1 + 512,
        "the dashboard grew from {} to {} bytes",
        before.1,
        after.1
    );
    h.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_only_its_own_job_groups() {
    let h = harness(|c| {
        let q = c.jobs.queues.get_mut("default").expect("the default queue");
        q.group_rate = Some(100.0);
    })
    .await;
    for key in [ACME, GLOBEX] {
        let res = post(
            &h,
            "/v1/jobs",
            key,
            json!({"queue": "default", "kind": "http", "group": "g1",
                   "payload": {"api": "slack", "path": "/chat.postMessage"}}),
        )
        .await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    // Wait until both groups have been used by the workers.
    let mut seen = false;
    for _ in 0..200 {
        let mine = h.get_json("/v1/limits", ACME).await;
        let names: Vec<String> = mine["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resource"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.contains(":globex:")),
            "acme sees globex's group: {names:?}"
        );
        if names.iter().any(|n| n.contains(":acme:")) {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(seen, "acme sees its own job group");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_is_a_tenants_permission() {
    let h = harness(|c| c.tenants[1].high_priority = true).await;
    let ask = |key: &'static str| {
        h.post("/v1/chat/completions", &common::chat(MODEL))
            .bearer_auth(key)
            .header("x-sluice-priority", "high")
            .send()
    };
    let e = expect_error(ask(ACME).await.unwrap(), 403, "forbidden").await;
    assert!(
        e["message"].as_str().unwrap().contains("x-sluice-priority"),
        "{e}"
    );
    assert_eq!(ask(GLOBEX).await.unwrap().status(), StatusCode::OK);
    let res = post(
        &h,
        "/v1/limits/acquire",
        ACME,
        json!({"model": MODEL, "priority": "high"}),
    )
    .await;
    expect_error(res, 403, "forbidden").await;
    h.stop().await;
}

/// A replica that started open learns of tenants made through another
/// replica from the key store itself (no Redis, so no bus notice), and
/// the replica that made them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_replica_closes_when_the_store_gets_a_tenant() {
    let h = common::Harness::with(sim_config(), |c| c.admin_token = Some(ADMIN.into())).await;
    let data_dir = h.data_dir.clone();
    let other = h
        .replica(move |c| {
            c.data_dir = data_dir;
            c.jobs.workers = false;
        })
        .await;
    let anonymous = |url: String| {
        let http = h.http.clone();
        async move {
            http.post(url)
                .json(&common::chat(MODEL))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let chat = "/v1/chat/completions";
    assert_eq!(anonymous(other.url(chat)).await, StatusCode::OK, "open");
    assert_eq!(anonymous(h.url(chat)).await, StatusCode::OK, "open");
    let res = h
        .post("/v1/tenants", &json!({"name": "acme"}))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    // The replica that made it: at once.
    assert_eq!(anonymous(h.url(chat)).await, StatusCode::UNAUTHORIZED);
    // The other: from the store, within its periodic check.
    common::wait_until("the other replica asks for a key", || {
        let url = other.url(chat);
        let call = anonymous(url);
        async move {
            let status = call.await;
            if status != StatusCode::UNAUTHORIZED {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            status == StatusCode::UNAUTHORIZED
        }
    })
    .await;
    h.stop().await;
}
