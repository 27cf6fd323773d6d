//! The four holes of issue 18 that were confirmed by running them, each
//! tried again as the hostile client did, against a gateway with two
//! tenants (`acme`, `globex`) in front of the simulator:
//!
//! 1. an anonymous release of another tenant's grant, settled at 10^12,
//!    locked a model for every tenant for centuries;
//! 2. an anonymous report paused a model for everyone;
//! 3. `/proxy` left its base path by double encoding and backslashes;
//! 4. any tenant paused a queue or purged every tenant's dead jobs.

mod common;

use common::{ACME, GLOBEX, ModelLimits, expect_error, header, model_limits, raw, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::Config;

const ADMIN: &str = "the-operator";
const MODEL: &str = "openai/gpt-4o-mini";

/// Two tenants, the admin token, and a model at 5 a second (burst 5).
fn setup(c: &mut Config) {
    common::two_tenants(c);
    c.admin_token = Some(ADMIN.into());
    c.models.push(ModelLimits {
        requests_per_second: 5.0,
        burst: 5,
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

/// POSTs `body` to `path` with `key` (`None`: anonymous).
async fn post(
    h: &common::Harness,
    path: &str,
    key: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut req = h.post(path, &body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.expect("the gateway answers")
}

async fn acquire(h: &common::Harness, key: &str, body: Value) -> Value {
    let res = post(h, "/v1/limits/acquire", Some(key), body).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// `globex`'s chat call to the model, with a deadline of `timeout_ms`.
async fn globex_chat(h: &common::Harness, timeout_ms: u64) -> reqwest::Response {
    h.post("/v1/chat/completions", &common::chat(MODEL))
        .bearer_auth(GLOBEX)
        .header("x-sluice-timeout-ms", timeout_ms.to_string())
        .send()
        .await
        .unwrap()
}

/// The model's `available`, as `key` sees it in `GET /v1/limits`.
async fn available(h: &common::Harness, key: &str) -> Option<f64> {
    let res = h.get("/v1/limits").bearer_auth(key).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == MODEL)
        .and_then(|r| r["available"].as_f64())
}

/// Hole 1, as found: acme's grant, released by someone else at 10^12.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole1_no_one_but_the_holder_releases_a_grant_and_a_settle_is_bounded() {
    let h = harness(|_| {}).await;
    let g = acquire(&h, ACME, json!({"model": MODEL})).await;
    let id = g["grant_id"].as_str().unwrap().to_owned();
    // 128 random bits, not a counter: nothing to guess.
    assert_eq!(id.len(), 32, "{id}");
    let other = acquire(&h, ACME, json!({"model": MODEL})).await;
    assert_ne!(other["grant_id"], g["grant_id"]);
    let huge = json!({"grant_id": id, "actual_cost": 1_000_000_000_000u64});

    // Anonymous: who are you?
    let res = post(&h, "/v1/limits/release", None, huge.clone()).await;
    expect_error(res, 401, "invalid_api_key").await;
    // Another tenant: no such grant (its own or none).
    let res = post(&h, "/v1/limits/release", Some(GLOBEX), huge.clone()).await;
    expect_error(res, 404, "not_found").await;
    // The ids the issue counted up to are not even ids.
    for guess in ["1", "2", "18446744073709551615"] {
        let res = post(
            &h,
            "/v1/limits/release",
            Some(GLOBEX),
            json!({"grant_id": guess, "actual_cost": 1}),
        )
        .await;
        expect_error(res, 400, "invalid_request").await;
    }
    // The holder itself pays at most twice what it reserved.
    let res = post(&h, "/v1/limits/release", Some(ACME), huge).await;
    assert_eq!(res.status(), StatusCode::OK);
    let done: Value = res.json().await.unwrap();
    assert_eq!(
        (done["settled_cost"].as_u64(), done["clamped"].as_bool()),
        (Some(2), Some(true))
    );
    // globex's call goes through, at once.
    assert_eq!(globex_chat(&h, 5_000).await.status(), StatusCode::OK);
    h.stop().await;
}

/// Hole 1 again with the grant-level bound taken away by the operator: the
/// limiter itself never lets a bucket owe more than one window, so the
/// answer is a Retry-After of about a second, not 18446744074; and the
/// admin's `PUT` forgives what is owed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole1_debt_is_at_most_one_window_and_the_admin_clears_it() {
    let h = harness(|c| c.limits_api.max_settle_multiple = u64::MAX).await;
    let g = acquire(&h, ACME, json!({"model": MODEL})).await;
    let res = post(
        &h,
        "/v1/limits/release",
        Some(ACME),
        json!({"grant_id": g["grant_id"], "actual_cost": 1_000_000_000_000u64}),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    let owed = available(&h, GLOBEX).await.expect("the model is listed");
    assert!((-5.01..=-4.5).contains(&owed), "one window of debt: {owed}");
    let res = globex_chat(&h, 100).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!(wait <= 2, "retry-after {wait}");
    // A tenant cannot change limits; the operator can, and clears the debt.
    let put = |key: &'static str| {
        h.http
            .put(h.url("/v1/limits/openai%2Fgpt-4o-mini"))
            .bearer_auth(key)
            .json(&json!({"capacity": 5}))
            .send()
    };
    expect_error(put(ACME).await.unwrap(), 403, "forbidden").await;
    let res = put(ADMIN).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert!(cap["available"].as_f64().unwrap() >= 0.0, "{cap}");
    h.stop().await;
}

/// Hole 2, as found: `{"model":…,"status":429,"retry_after":"60"}` from
/// anyone paused the model and halved it; repeated, it held it at the floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole2_reports_come_from_grant_holders_once_per_grant() {
    let h = harness(|_| {}).await;
    let report = json!({"model": MODEL, "status": 429, "retry_after": "60"});
    let res = post(&h, "/v1/limits/report", None, report.clone()).await;
    expect_error(res, 401, "invalid_api_key").await;
    // A tenant without a grant on it has nothing to report.
    let res = post(&h, "/v1/limits/report", Some(GLOBEX), report.clone()).await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("grant_id"), "{e}");
    // Nor with another tenant's grant.
    let g = acquire(&h, ACME, json!({"model": MODEL})).await;
    let mut theirs = report.clone();
    theirs["grant_id"] = g["grant_id"].clone();
    let res = post(&h, "/v1/limits/report", Some(GLOBEX), theirs.clone()).await;
    expect_error(res, 404, "not_found").await;
    // Nothing of that reached the limiter: the model is neither paused
    // nor reduced.
    let res = globex_chat(&h, 5_000).await;
    assert_eq!(res.status(), StatusCode::OK);
    // The holder reports its call's answer, once. Alone, it pauses only
    // its own acquires (issue 33): the model is not reduced for globex.
    let res = post(&h, "/v1/limits/report", Some(ACME), theirs.clone()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert_eq!(
        (&cap["reduced"], &cap["applied"]),
        (&json!(false), &json!("own")),
        "{cap}"
    );
    let res = post(&h, "/v1/limits/report", Some(ACME), theirs).await;
    expect_error(res, 409, "conflict").await;
    // globex, holding a grant of its own, agrees: now the model is cut.
    let g = acquire(&h, GLOBEX, json!({"model": MODEL})).await;
    let mut agreed = report.clone();
    agreed["grant_id"] = g["grant_id"].clone();
    let res = post(&h, "/v1/limits/report", Some(GLOBEX), agreed).await;
    let cap: Value = res.json().await.unwrap();
    assert_eq!(cap["reduced"], true, "{cap}");
    h.stop().await;
}

/// Hole 3, as found: `curl --path-as-is "$G/proxy/slack/%252e%252e/%252e%252e/_sim/stats"`
/// answered the simulator's control route; `..%5C..` was reported to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole3_proxy_paths_never_leave_the_apis_base() {
    let h = harness(|_| {}).await;
    let auth = format!("Authorization: Bearer {ACME}");
    let send = |target: &'static str| {
        let auth = auth.clone();
        let addr = h.addr;
        async move { raw(addr, "GET", target, &[&auth]).await }
    };
    // Decoded once, `%252e` is the three characters `%2e`: passed on as
    // such, inside Slack's base, never read as a dot.
    let (status, body) = send("/proxy/slack/%252e%252e/%252e%252e/_sim/stats").await;
    assert!(!body.contains("uptime_ms"), "{status}: {body}");
    for target in [
        "/proxy/slack/%2e%2e/%2e%2e/_sim/stats",
        "/proxy/slack/%2E%2E/%2E%2E/_sim/stats",
        "/proxy/slack/..%5C..%5C_sim%5Cstats",
        "/proxy/slack/..%5c..%5c_sim/stats",
        "/proxy/slack/..\\..\\_sim\\stats",
        "/proxy/slack/../../_sim/stats",
        "/proxy/slack/a%2F..%2F..%2F_sim%2Fstats",
        "/proxy/slack/.%2e/.%2e/_sim/stats",
    ] {
        let (status, body) = send(target).await;
        assert_eq!(status, 400, "{target}: {body}");
        assert!(!body.contains("uptime_ms"), "{target}: {body}");
    }
    // The way in still works.
    let (status, _) = send("/proxy/slack/chat.postMessage").await;
    assert_eq!(status, 200);
    h.stop().await;
}

/// Hole 4, as found: `POST /v1/queues/default/pause` with globex's key
/// answered `{"paused":true}` when `admin_token` was unset (the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole4_queue_wide_calls_are_the_operators_only() {
    let queue_calls = [
        (reqwest::Method::POST, "/v1/queues/default/pause"),
        (reqwest::Method::POST, "/v1/queues/default/resume"),
        (reqwest::Method::POST, "/v1/queues/default/dead/retry"),
        (reqwest::Method::DELETE, "/v1/queues/default/dead"),
        (reqwest::Method::GET, "/v1/queues"),
    ];
    // No admin token (the default): refused to everyone.
    let h = harness(|c| c.admin_token = None).await;
    for (method, path) in &queue_calls {
        for key in [None, Some(GLOBEX)] {
            let mut req = h.http.request(method.clone(), h.url(path));
            if let Some(k) = key {
                req = req.bearer_auth(k);
            }
            let res = req.send().await.unwrap();
            let e = expect_error(res, 403, "forbidden").await;
            assert!(
                e["message"].as_str().unwrap().contains("admin_token"),
                "{e}"
            );
        }
    }
    h.stop().await;

    // With one: the operator only.
    let h = harness(|_| {}).await;
    for (method, path) in &queue_calls {
        let call = |key: Option<&'static str>| {
            let mut req = h.http.request(method.clone(), h.url(path));
            if let Some(k) = key {
                req = req.bearer_auth(k);
            }
            req.send()
        };
        expect_error(call(None).await.unwrap(), 401, "invalid_api_key").await;
        expect_error(call(Some(GLOBEX)).await.unwrap(), 403, "forbidden").await;
        assert_eq!(
            call(Some(ADMIN)).await.unwrap().status(),
            StatusCode::OK,
            "{path}"
        );
    }
    // A tenant's own jobs stay its own: acme's job is not globex's to read,
    // retry or cancel.
    let job = json!({"queue": "default", "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/x", "body": {}}});
    let res = post(&h, "/v1/jobs", Some(ACME), job).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/jobs/{id}")),
        (reqwest::Method::POST, format!("/v1/jobs/{id}/retry")),
        (reqwest::Method::POST, format!("/v1/jobs/{id}/cancel")),
    ] {
        let res = h
            .http
            .request(method, h.url(&path))
            .bearer_auth(GLOBEX)
            .send()
            .await
            .unwrap();
        expect_error(res, 404, "not_found").await;
    }
    h.stop().await;
}

/// Secrets: an upstream's redirect reaches the caller as it is; the
/// gateway never follows it, so the API's token (or Anthropic's
/// `x-api-key`) never travels to the host a redirect names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_from_upstream_are_passed_on_never_followed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // An upstream that answers every request with 302 to `/landed` on
    // itself, and counts the requests that land there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let landed = Arc::new(AtomicUsize::new(0));
    let counter = landed.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = if String::from_utf8_lossy(&head).contains("/landed") {
                    counter.fetch_add(1, Ordering::SeqCst);
                    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                        .to_string()
                } else {
                    format!(
                        "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/landed\r\n\
                         content-length: 0\r\nconnection: close\r\n\r\n"
                    )
                };
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    let h = harness(|c| {
        let mut api = c.apis[0].clone();
        api.name = "moved".into();
        api.base_url = format!("http://127.0.0.1:{port}/x");
        api.tool_prefixes.clear();
        c.apis.push(api);
    })
    .await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = client
        .get(h.url("/proxy/moved/hello"))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FOUND);
    assert_eq!(
        header(&res, "location"),
        format!("http://127.0.0.1:{port}/landed")
    );
    assert_eq!(
        landed.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    h.stop().await;
}
