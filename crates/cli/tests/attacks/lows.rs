//! The lower findings of issue 33 that are about names, owners and
//! permissions, each as the hostile caller tried it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{ACME, ADMIN, GLOBEX, MODEL, Target, chat, refusal};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_may_not_send_high_priority() {
    let t = Target::start("attack-priority", "");
    let res = t
        .http
        .post(t.url("/v1/chat/completions"))
        .bearer_auth(ACME)
        .header("x-sluice-priority", "high")
        .json(&chat(MODEL))
        .send()
        .await
        .unwrap();
    let (status, e) = refusal(res).await;
    assert_eq!(status, 403, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("x-sluice-priority"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_headers_may_not_name_another_job_and_paths_no_dot_dot_semicolon() {
    let t = Target::start("attack-jobs", "");
    let job = |headers: Value, path: &str| {
        json!({"queue": "default", "kind": "http",
               "payload": {"api": "slack", "path": path, "headers": headers}})
    };
    let (status, e) = refusal(
        t.post(
            "/v1/jobs",
            Some(ACME),
            &job(json!({"X-Sluice-Job-Id": "1"}), "/chat.postMessage"),
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, e["param"].as_str()),
        (400, Some("payload.headers.X-Sluice-Job-Id")),
        "{e}"
    );
    let (status, e) = refusal(
        t.post("/v1/jobs", Some(ACME), &job(json!({}), "/a/..;/_sim/stats"))
            .await,
    )
    .await;
    assert_eq!(
        (status, e["param"].as_str()),
        (400, Some("payload.path")),
        "{e}"
    );
    // And on /proxy.
    for path in [
        "/proxy/slack/..;/_sim/stats",
        "/proxy/slack/a/..;x/..;/_sim/stats",
    ] {
        let res = t
            .http
            .get(t.url(path))
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_joins_only_a_request_with_the_same_body() {
    // gpt-4o at one call per five seconds: the second call waits in the
    // limiter, in flight, while the third comes.
    let t = Target::start(
        "attack-dedup",
        "[[models]]\nprefix = \"openai/gpt-4o\"\nrequests_per_second = 0.2\nburst = 1\n",
    );
    let send = |id: &'static str, body: Value| {
        t.http
            .post(t.url("/v1/chat/completions"))
            .bearer_auth(ACME)
            .header("x-request-id", id)
            .json(&body)
            .send()
    };
    assert_eq!(
        send("first", chat("openai/gpt-4o")).await.unwrap().status(),
        200
    );
    let waiting = tokio::spawn(send("same-id", chat("openai/gpt-4o")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut other = chat("openai/gpt-4o");
    other["messages"][0]["content"] = json!("another question");
    let (status, e) = refusal(send("same-id", other).await.unwrap()).await;
    assert_eq!(status, 409, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("x-request-id"),
        "{e}"
    );
    assert_eq!(waiting.await.unwrap().unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_tokens_cannot_be_guessed_on_api_routes() {
    let t = Target::start("attack-guess", "");
    let put = |token: &'static str| {
        t.http
            .put(t.url("/v1/limits/api%3Aslack"))
            .bearer_auth(token)
            .json(&json!({"capacity": 10}))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(put("guess").await.unwrap().status(), 403);
    }
    let res = put("guess").await.unwrap();
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    // Until the window ends, not even the right token is tried.
    assert_eq!(put(ADMIN).await.unwrap().status(), 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_reads_little_refuses_other_sites_and_is_secure_behind_tls() {
    let t = Target::start("attack-login", "");
    let login = |body: Vec<u8>, headers: &[(&str, &str)]| {
        let mut req = t
            .http
            .post(t.url("/ui/login"))
            .header("content-type", "application/json")
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send()
    };
    let big = format!("{{\"token\": \"{}\"}}", "x".repeat(64 << 10)).into_bytes();
    assert_eq!(login(big, &[]).await.unwrap().status(), 413);
    let good = json!({"token": ADMIN}).to_string().into_bytes();
    let res = login(good.clone(), &[("origin", "https://evil.example")])
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = login(good.clone(), &[("sec-fetch-site", "cross-site")])
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = login(good.clone(), &[]).await.unwrap();
    assert_eq!(res.status(), 200);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(!cookie.contains("Secure"), "{cookie}");
    let res = login(good, &[("x-forwarded-proto", "https")])
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("; Secure"), "{cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_tenants_queued_jobs_do_not_run() {
    let t = Target::start("attack-blocked", "");
    let admin = |method: reqwest::Method, path: &str, body: Value| {
        t.http
            .request(method, t.url(path))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };
    let ok = |res: reqwest::Response| async move {
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{status} {body}");
        body
    };
    use reqwest::Method;
    ok(
        admin(Method::POST, "/v1/tenants", json!({"name": "initech"}))
            .await
            .unwrap(),
    )
    .await;
    let key = ok(
        admin(Method::POST, "/v1/keys", json!({"tenant": "initech"}))
            .await
            .unwrap(),
    )
    .await;
    let key = key["key"].as_str().unwrap().to_owned();
    ok(admin(Method::POST, "/v1/queues/default/pause", json!({}))
        .await
        .unwrap())
    .await;
    let res = t
        .post(
            "/v1/jobs",
            Some(&key),
            &json!({"queue": "default", "kind": "http",
                    "payload": {"api": "slack", "path": "/chat.postMessage", "body": {"text": "spend"}}}),
        )
        .await;
    assert_eq!(res.status(), 201);
    ok(admin(Method::POST, "/v1/tenants/initech/block", json!({}))
        .await
        .unwrap())
    .await;
    ok(admin(Method::POST, "/v1/queues/default/resume", json!({}))
        .await
        .unwrap())
    .await;
    let mut dead = false;
    for _ in 0..300 {
        let q = ok(admin(Method::GET, "/v1/queues", json!({})).await.unwrap()).await;
        let default = q["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue"] == "default")
            .cloned()
            .unwrap();
        assert_eq!(
            default["counts"]["completed"], 0,
            "the blocked tenant's job ran: {q}"
        );
        if default["counts"]["dead"] == 1 {
            dead = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(dead, "the job ends dead");
    // globex's jobs still run.
    let res = t
        .post(
            "/v1/jobs",
            Some(GLOBEX),
            &json!({"queue": "default", "kind": "http",
                    "payload": {"api": "slack", "path": "/chat.postMessage"}}),
        )
        .await;
    assert_eq!(res.status(), 201);
}
