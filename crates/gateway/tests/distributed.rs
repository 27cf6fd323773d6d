//! Distributed mode: two gateways with `[redis]` share every limit, a 429
//! reported at one reduces the other, and `/readyz` reports Redis.

mod common;

use common::{Harness, chat, model_limits};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, RedisSettings};

fn redis_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
            None
        }
    }
}

fn shared(url: &str, prefix: &str, id: &str) -> impl FnOnce(&mut Config) {
    // 1 per 100 s, burst 10: no refill within the test.
    shared_at(url, prefix, id, 0.01)
}

fn shared_at(url: &str, prefix: &str, id: &str, rps: f64) -> impl FnOnce(&mut Config) {
    let (url, prefix, id) = (url.to_owned(), prefix.to_owned(), id.to_owned());
    move |c: &mut Config| {
        let mut m = model_limits("openai/");
        m.requests_per_second = rps;
        m.burst = 10;
        c.models.push(m);
        c.redis = Some(RedisSettings {
            url,
            mode: "exact".into(),
            prefix,
            timeout_ms: 500,
            failure: "fail_open".into(),
            replica_id: Some(id),
            lease_ttl_ms: 30_000,
            block_ttl_ms: 100,
        });
    }
}

fn prefix() -> String {
    format!("gw{:x}:", fastrand::u64(..))
}

/// Cuts `model`'s shared limit through `h`'s limiter API: a report is
/// about the call made under a grant the caller holds; one 429 is a
/// timing collision (a pause, no cut), three in a row, each a while after
/// the last, prove the limit lower. The last report's answer.
async fn cut(h: &Harness, model: &str) -> Value {
    let mut body = Value::Null;
    for _ in 0..3 {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        let grant = h.hold(model).await;
        let res = h
            .send(
                "/v1/limits/report",
                &json!({"grant_id": grant, "status": 429, "retry_after": "0"}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        body = res.json().await.unwrap();
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_one_limit() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = Harness::with(common::sim_config(), shared(&url, &p, "a")).await;
    let b = a.replica(shared(&url, &p, "b")).await;
    let mut ok = 0;
    let mut limited = 0;
    for i in 0..30 {
        let base = if i % 2 == 0 { a.url("") } else { b.url("") };
        let res = a
            .http
            .post(format!("{base}/v1/chat/completions"))
            .header("x-sluice-timeout-ms", "2000")
            .json(&chat("openai/gpt-4o-mini"))
            .send()
            .await
            .unwrap();
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(res.headers().contains_key("retry-after"));
                limited += 1;
            }
            s => panic!("unexpected {s}: {}", res.text().await.unwrap_or_default()),
        }
    }
    // Not 10 per replica: 10 in all.
    assert_eq!((ok, limited), (10, 20));
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_reported_at_one_gateway_reduces_the_other() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = Harness::with(common::sim_config(), shared_at(&url, &p, "a", 10.0)).await;
    let b = a.replica(shared_at(&url, &p, "b", 10.0)).await;
    let model = "openai/gpt-4o";
    let body = cut(&a, model).await;
    assert_eq!(body["capacity"], 5, "{body}");
    // The other gateway reads the shared state.
    let acquired: Value = a
        .http
        .post(b.url("/v1/limits/acquire"))
        .json(&json!({"model": model}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let res = a
        .http
        .post(b.url("/v1/limits/report"))
        .json(&json!({"grant_id": acquired["grant_id"], "status": 200}))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (body["capacity"].clone(), body["configured"].clone()),
        (json!(5), json!(10)),
        "{body}"
    );
    assert_eq!(body["reduced"], true);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_reports_redis_and_bad_settings_are_named() {
    let Some(url) = redis_url() else { return };
    let a = Harness::with(common::sim_config(), shared(&url, &prefix(), "a")).await;
    let body: Value = a.get("/readyz").send().await.unwrap().json().await.unwrap();
    assert_eq!(body["redis"]["degraded"], false, "{body}");
    assert_eq!(body["redis"]["mode"], "exact");
    let metrics = a.metrics().await;
    // The recorder is shared by every test of this binary (some with Redis
    // away): the family is there; its value is what /readyz says above.
    assert!(metrics.contains("\nsluice_redis_degraded "), "{metrics}");
    a.stop().await;

    let bad = "[redis]\nurl = \"http://127.0.0.1:6379\"\n";
    let e = sluice_gateway::config::load_str(bad, "test.toml", Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("redis.url"), "{e}");
    let bad = "[redis]\nurl = \"redis://127.0.0.1:6379\"\nmode = \"fast\"\n";
    let e = sluice_gateway::config::load_str(bad, "test.toml", Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("redis.mode"), "{e}");
    let bad = "[redis]\nurl = \"redis://127.0.0.1:6379\"\nblock_ttl_ms = 99999999\n";
    let e = sluice_gateway::config::load_str(bad, "test.toml", Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("redis.block_ttl_ms"), "{e}");
    let bad = "[redis]\nurl = \"redis://127.0.0.1:6379\"\nfailover = 1\n";
    let e = sluice_gateway::config::load_str(bad, "test.toml", Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("failover"), "{e}");
}

/// A loopback port nothing listens on: Redis "down" from the start.
fn dead_redis() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    format!("redis://127.0.0.1:{port}")
}

fn with_failure(failure: &str) -> impl FnOnce(&mut Config) {
    let url = dead_redis();
    let failure = failure.to_owned();
    move |c: &mut Config| {
        shared_at(&url, "dead:", "a", 10.0)(c);
        if let Some(r) = &mut c.redis {
            r.failure = failure;
            r.timeout_ms = 100;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_open_on_the_local_share() {
    let a = Harness::with(common::sim_config(), with_failure("fail_open")).await;
    let res = a.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "failing open stays ready");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["redis"]["degraded"], true, "{body}");
    let metrics = a.metrics().await;
    assert!(metrics.contains("\nsluice_redis_degraded "), "{metrics}");
    // Served, on this replica's own share (the only replica it saw).
    let res = a
        .send("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_closed_with_429_and_unready() {
    let a = Harness::with(common::sim_config(), with_failure("fail_closed")).await;
    let res = a.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = res.json().await.unwrap();
    assert!(body["reasons"].to_string().contains("redis"), "{body}");
    let res = a
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .header("x-sluice-timeout-ms", "2000")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(
        a.sim.stats().model("gpt-4o-mini").requests,
        0,
        "nothing went upstream"
    );
    a.stop().await;
}

/// Slack at 4 calls (no refill within the test), through Redis.
fn slack_of_four(url: &str, prefix: &str, id: &str) -> impl FnOnce(&mut Config) {
    let shared = shared(url, prefix, id);
    move |c: &mut Config| {
        shared(c);
        let slack = c.apis.iter_mut().find(|a| a.name == "slack").unwrap();
        slack.requests_per_second = 0.01;
        slack.burst = 4;
    }
}

/// Jobs run by the workers of two gateways on one Redis and one job store
/// take from the same `api:slack` bucket as the calls both proxy: 3 jobs
/// leave 1 of Slack's 4 calls for 6 proxied ones, whichever replica ran
/// the jobs and whichever the calls reach (per replica, it would be 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_proxied_calls_share_an_apis_bucket_across_gateways() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = Harness::with(common::sim_config(), slack_of_four(&url, &p, "a")).await;
    let data_dir = a.data_dir.clone();
    let b = a
        .replica(move |c| {
            slack_of_four(&url, &p, "b")(c);
            // One job store (SQLite in the shared data directory).
            c.data_dir = data_dir;
        })
        .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let base = if i % 2 == 0 { a.url("") } else { b.url("") };
        let res = a
            .http
            .post(format!("{base}/v1/jobs"))
            .json(&json!({
                "queue": "default",
                "kind": "http",
                "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage",
                            "body": {"n": i}}
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let job: Value = res.json().await.unwrap();
        ids.push(job["id"].as_i64().unwrap());
    }
    for id in ids {
        common::wait_until(&format!("job {id} completed"), || {
            let req = a.get(&format!("/v1/jobs/{id}"));
            async move {
                let job: Value = req.send().await.unwrap().json().await.unwrap();
                assert_ne!(job["state"], "dead", "{job}");
                job["state"] == "completed"
            }
        })
        .await;
    }
    let (mut ok, mut limited) = (0, 0);
    for i in 0..6 {
        let base = if i % 2 == 0 { a.url("") } else { b.url("") };
        let res = a
            .http
            .post(format!("{base}/proxy/slack/chat.postMessage"))
            .header("x-sluice-timeout-ms", "1000")
            .json(&json!({"n": i}))
            .send()
            .await
            .unwrap();
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => limited += 1,
            s => panic!("unexpected {s}: {}", res.text().await.unwrap_or_default()),
        }
    }
    assert_eq!((ok, limited), (1, 5), "3 jobs + 1 call = Slack's 4");
    assert_eq!(a.sim.stats().api("slack").ok, 4);
    a.stop().await;
}

/// A scrape reads the shared state of models and APIs from Redis, never
/// of the sessions (one per thread, thousands of them), and at most once
/// per `metrics.refresh_interval_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_read_no_sessions_from_redis() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = Harness::with(common::sim_config(), |c| {
        shared_at(&url, &p, "a", 1_000.0)(c);
        c.models.last_mut().unwrap().burst = 1_000;
        c.metrics.refresh_interval_ms = 3_600_000;
    })
    .await;
    for i in 0..200 {
        let res = a
            .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
            .header("x-sluice-thread", format!("fresh-{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.bytes().await.unwrap();
    }
    let text = a.metrics().await;
    let gauges: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("sluice_limiter_available_tokens{"))
        .collect();
    assert!(
        gauges.iter().any(|l| l.contains("openai/gpt-4o-mini")),
        "{text}"
    );
    assert!(
        !gauges.iter().any(|l| l.contains("session")),
        "sessions in {gauges:?}"
    );
    // The caller's own sessions are still listed by `GET /v1/limits`.
    let sessions = a
        .limits()
        .await
        .iter()
        .filter(|r| {
            r["resource"]
                .as_str()
                .is_some_and(|n| n.starts_with("session:"))
        })
        .count();
    assert_eq!(sessions, 200);
    a.stop().await;
}

/// As [`shared_at`] (10/s), with an admin token.
fn with_admin<'a>(url: &'a str, prefix: &'a str, id: &'a str) -> impl FnOnce(&mut Config) + 'a {
    let shared = shared_at(url, prefix, id, 10.0);
    move |c: &mut Config| {
        shared(c);
        c.admin_token = Some("the-operator".into());
    }
}

/// `GET {base}/v1/audit?kind=capacity` as the operator, once it holds an
/// entry by `actor`: that entry.
async fn cut_by(h: &Harness, base: &str, actor: &str) -> Value {
    common::wait_for(&format!("a capacity cut by {actor} at {base}"), || async {
        let body: Value = h
            .http
            .get(format!("{base}/v1/audit?kind=capacity"))
            .bearer_auth("the-operator")
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        body["entries"]
            .as_array()?
            .iter()
            .find(|e| e["actor"] == actor)
            .cloned()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_heard_on_the_bus_is_in_the_other_gateways_audit_trail() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = Harness::with(common::sim_config(), with_admin(&url, &p, "a")).await;
    let b = a.replica(with_admin(&url, &p, "b")).await;
    let model = "openai/gpt-4o";
    // The cut is announced on the bus.
    cut(&a, model).await;
    // At a, the reporter (an open gateway's workspace) cut it; at b, the
    // bus told it that replica a did.
    let here = cut_by(&a, &a.url(""), "tenant:default").await;
    assert_eq!(here["target"], model, "{here}");
    let there = cut_by(&a, &b.url(""), "bus:a").await;
    assert_eq!(there["target"], model, "{there}");
    assert_eq!(
        there["after"]["capacity"], here["after"]["capacity"],
        "{there}"
    );
    a.stop().await;
}
