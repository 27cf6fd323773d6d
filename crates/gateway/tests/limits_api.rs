//! The limiter API for agents that call upstreams themselves: acquire,
//! release, report, list, and live capacity changes behind the admin token.

mod common;

use common::{Harness, ModelLimits, expect_error, header, model_limits, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ADMIN: &str = "admin-secret";

async fn harness() -> Harness {
    Harness::with(sim_config(), |c| {
        c.admin_token = Some(ADMIN.into());
        // One request per ten seconds, so that a second one is refused.
        c.models.push(ModelLimits {
            requests_per_second: 0.1,
            burst: 1,
            ..model_limits("openai/tiny")
        });
        c.models.push(ModelLimits {
            tokens_per_minute: Some(10_000),
            ..model_limits("openai/tokens")
        });
    })
    .await
}

async fn acquire(h: &Harness, body: Value) -> reqwest::Response {
    h.send("/v1/limits/acquire", &body).await
}

async fn grant(h: &Harness, body: Value) -> Value {
    let res = acquire(h, body.clone()).await;
    assert_eq!(res.status(), StatusCode::OK, "acquire {body}");
    let g: Value = res.json().await.unwrap();
    assert!(g["grant_id"].is_string(), "{g}");
    assert!(g["expires_in_ms"].as_u64().unwrap() > 0, "{g}");
    g
}

async fn release(h: &Harness, body: Value) -> reqwest::Response {
    h.send("/v1/limits/release", &body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_by_resource_model_or_tool() {
    let h = harness().await;
    let g = grant(&h, json!({"resource": "openai/gpt-4o"})).await;
    assert_eq!(g["resource"], "openai/gpt-4o");
    assert_eq!(g["cost"], 1);
    let g = grant(
        &h,
        json!({"model": "anthropic/claude-sonnet-4-5", "cost": 2}),
    )
    .await;
    assert_eq!(g["resource"], "anthropic/claude-sonnet-4-5");
    assert_eq!(g["cost"], 2);
    let g = grant(
        &h,
        json!({"tool": "SLACK_SEND_MESSAGE", "priority": "high"}),
    )
    .await;
    assert_eq!(g["resource"], "api:slack");
    let g = grant(&h, json!({"resource": "api:github", "timeout_ms": 100})).await;
    assert_eq!(g["resource"], "api:github");
    let res = release(&h, json!({"grant_id": g["grant_id"]})).await;
    assert_eq!(res.status(), StatusCode::OK);
    // Nothing went upstream: the agent calls the upstream itself.
    assert!(h.sim.stats().models.is_empty());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_a_429_with_retry_after_and_ratelimit_headers() {
    let h = harness().await;
    grant(&h, json!({"model": "openai/tiny"})).await;
    for body in [
        json!({"model": "openai/tiny"}),
        // Waiting would not help within 100 ms either.
        json!({"model": "openai/tiny", "timeout_ms": 100}),
    ] {
        let res = acquire(&h, body).await;
        let retry_after: u64 = header(&res, "retry-after").parse().unwrap();
        assert!((1..=10).contains(&retry_after), "{retry_after}");
        assert_eq!(header(&res, "ratelimit-policy"), "1;w=10");
        let now = header(&res, "ratelimit");
        assert!(
            now.contains("limit=1") && now.contains("remaining=0"),
            "{now}"
        );
        let e = expect_error(res, 429, "rate_limited").await;
        assert!(
            e["message"].as_str().unwrap().contains("openai/tiny"),
            "{e}"
        );
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_settles_the_actual_cost_and_unknown_grants_are_404() {
    let h = harness().await;
    let tokens = "tokens:openai/tokens";
    let g = grant(&h, json!({"resource": tokens, "cost": 5_000})).await;
    let held = h.resource(tokens).await.unwrap();
    assert!(held["available"].as_f64().unwrap() <= 5_100.0, "{held}");

    let res = release(&h, json!({"grant_id": g["grant_id"], "actual_cost": 100})).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["released"], g["grant_id"]);
    let settled = h
        .resource(tokens)
        .await
        .map_or(10_000.0, |r| r["available"].as_f64().unwrap());
    assert!(settled >= 9_800.0, "4900 came back: {settled}");

    // Once released, the grant is gone; so is one never given.
    let res = release(&h, json!({"grant_id": g["grant_id"]})).await;
    expect_error(res, 404, "not_found").await;
    let res = release(&h, json!({"grant_id": "0123456789abcdef0123456789abcdef"})).await;
    expect_error(res, 404, "not_found").await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_429_cuts_capacity() {
    let h = harness().await;
    let g = grant(&h, json!({"model": "openai/gpt-4o"})).await;
    let res = h
        .send(
            "/v1/limits/report",
            &json!({"grant_id": g["grant_id"], "status": 429, "retry_after": "1"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert_eq!(cap["resource"], "openai/gpt-4o");
    assert_eq!(cap["reduced"], true, "{cap}");
    assert_eq!(cap["configured"], 1_000);
    assert_eq!(cap["capacity"], 500, "halved: {cap}");
    assert!(cap["paused_ms"].as_u64().unwrap() > 0, "{cap}");

    let listed = h.resource("openai/gpt-4o").await.expect("listed");
    assert_eq!(listed["capacity"], 500);
    assert!(listed["reduction"].as_f64().unwrap() > 0.4, "{listed}");

    // A success with the provider's headers is accepted too.
    let g = grant(&h, json!({"tool": "GITHUB_CREATE_ISSUE"})).await;
    let res = h
        .send(
            "/v1/limits/report",
            &json!({
                "grant_id": g["grant_id"],
                "tool": "GITHUB_CREATE_ISSUE",
                "status": 200,
                "headers": {"x-ratelimit-remaining-requests": "3"},
            }),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert_eq!(cap["resource"], "api:github");
    // Synced down to what the provider has left (plus a few ms of refill).
    assert!(cap["available"].as_f64().unwrap() < 100.0, "{cap}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_limits_lists_every_live_resource() {
    let h = harness().await;
    grant(&h, json!({"model": "openai/gpt-4o-mini"})).await;
    let all = h.limits().await;
    let r = all
        .iter()
        .find(|r| r["resource"] == "openai/gpt-4o-mini")
        .expect("listed");
    for field in [
        "algorithm",
        "capacity",
        "configured",
        "burst",
        "window_ms",
        "available",
        "in_flight",
        "waiting",
        "reduced",
    ] {
        assert!(!r[field].is_null(), "{field} in {r}");
    }
    assert_eq!(r["capacity"], 1_000);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_needs_the_admin_token_and_takes_effect_at_once() {
    let h = harness().await;
    let body = json!({"capacity": 2, "window_ms": 60_000});
    let put = |auth: Option<&'static str>| {
        let mut r = h.http.put(h.url("/v1/limits/api:slack")).json(&body);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        r.send()
    };
    expect_error(put(None).await.unwrap(), 401, "invalid_api_key").await;
    expect_error(put(Some("Bearer wrong")).await.unwrap(), 403, "forbidden").await;
    let res = put(Some("Bearer admin-secret")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert_eq!(
        (cap["capacity"].as_u64(), cap["window_ms"].as_u64()),
        (Some(2), Some(60_000))
    );

    grant(&h, json!({"tool": "SLACK_SEND_MESSAGE"})).await;
    grant(&h, json!({"tool": "SLACK_LIST_CHANNELS"})).await;
    let res = acquire(&h, json!({"resource": "api:slack"})).await;
    expect_error(res, 429, "rate_limited").await;

    // Resources with a slash are addressed percent-encoded.
    let res = h
        .http
        .put(h.url("/v1/limits/openai%2Fgpt-4o"))
        .bearer_auth(ADMIN)
        .json(&json!({"capacity": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cap: Value = res.json().await.unwrap();
    assert_eq!(
        (cap["resource"].as_str(), cap["capacity"].as_u64()),
        (Some("openai/gpt-4o"), Some(7))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_are_refused_without_a_configured_token() {
    let h = Harness::start().await;
    let res = h
        .http
        .put(h.url("/v1/limits/api:slack"))
        .bearer_auth("anything")
        .json(&json!({"capacity": 2}))
        .send()
        .await
        .unwrap();
    expect_error(res, 403, "forbidden").await;
    h.stop().await;
}

/// Every bad field is named in the 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_fields_are_named() {
    let h = harness().await;
    let cases = [
        (
            "/v1/limits/acquire",
            json!({"resource": "openai/gpt-4o", "cost": "many"}),
            "cost",
        ),
        (
            "/v1/limits/acquire",
            json!({"resource": "openai/gpt-4o", "cost": 0}),
            "cost",
        ),
        (
            "/v1/limits/acquire",
            json!({"resourse": "openai/gpt-4o"}),
            "resourse",
        ),
        (
            "/v1/limits/acquire",
            json!({"model": "openai/gpt-4o", "priority": "urgent"}),
            "priority",
        ),
        ("/v1/limits/acquire", json!({"model": "mistral/x"}), "model"),
        (
            "/v1/limits/acquire",
            json!({"tool": "NOTHING_KNOWN"}),
            "tool",
        ),
        (
            "/v1/limits/acquire",
            json!({"model": "openai/gpt-4o", "tool": "SLACK_X"}),
            "exactly one",
        ),
        (
            "/v1/limits/acquire",
            json!({"resource": "openai/gpt-4o", "timeout_ms": -1}),
            "timeout_ms",
        ),
        ("/v1/limits/release", json!({"grant_id": "abc"}), "grant_id"),
        ("/v1/limits/release", json!({}), "grant_id"),
        (
            "/v1/limits/report",
            json!({"model": "openai/gpt-4o", "status": 99}),
            "status",
        ),
        (
            "/v1/limits/report",
            json!({"model": "openai/gpt-4o"}),
            "status",
        ),
        (
            "/v1/limits/report",
            json!({"model": "openai/gpt-4o", "status": 429, "retry_after": "soon"}),
            "retry_after",
        ),
        (
            "/v1/limits/report",
            json!({"model": "openai/gpt-4o", "status": 429}),
            "grant_id",
        ),
        (
            "/v1/limits/report",
            json!({"grant_id": "1", "status": 429}),
            "grant_id",
        ),
    ];
    for (path, body, field) in cases {
        let res = h.send(path, &body).await;
        let e = expect_error(res, 400, "invalid_request").await;
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(field), "{path} {body}: {msg}");
    }
    let res = h
        .http
        .put(h.url("/v1/limits/api:slack"))
        .bearer_auth(ADMIN)
        .json(&json!({"capacity": 0}))
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("capacity"), "{e}");

    let res = acquire(&h, json!({"resource": "nothing-known"})).await;
    expect_error(res, 404, "not_found").await;
    h.stop().await;
}
