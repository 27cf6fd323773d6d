//! Health, readiness and metrics. (Readiness under a busy queue is in
//! `admission.rs`, where the queue is blocked.)

mod common;

use common::{Harness, chat};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::{Faults, Scope};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz_answer_when_idle() {
    let h = Harness::start().await;
    for path in ["/healthz", "/health"] {
        let res = h.get(path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["status"], "ok", "{path}");
    }

    // The bare address says where to look.
    let root: Value = h.get("/").send().await.unwrap().json().await.unwrap();
    assert_eq!(root["name"], "sluice");
    assert_eq!(root["api"], "/openapi.json");
    // The API's description lists every route, this one included.
    let api: Value = h
        .get("/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["openapi"], "3.1.0");
    assert!(api["paths"]["/"]["get"].is_object(), "{}", api["paths"]);
    assert_eq!(
        api["paths"]["/v1/chat/completions"]["post"]["security"][0],
        json!({"tenantKey": []})
    );

    let res = h.get("/readyz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["reasons"], json!([]));
    assert_eq!(body["busy"], false);
    h.stop().await;
}

/// One recorder serves the whole process, so this checks presence, not
/// exact counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_with_sluice_families() {
    let h = Harness::start().await;
    h.sim
        .set_faults(
            Scope::Model("throttled".into()),
            Faults {
                force_429: true,
                force_429_retry_after_ms: 10,
                ..Faults::none()
            },
        )
        .unwrap();
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    let res = h
        .send("/v1/chat/completions", &chat("openai/throttled"))
        .await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    res.bytes().await.unwrap();
    let res = h.send("/v1/chat/completions", &chat("nobody/x")).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);

    let res = h.get("/metrics").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let ctype = common::header(&res, "content-type");
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    let text = res.text().await.unwrap();
    for family in [
        "sluice_requests_total",
        "sluice_upstream_429_total",
        "sluice_retries_total",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family}")),
            "{family} missing from:\n{text}"
        );
        assert!(text.contains(&format!("# HELP {family}")), "{family} help");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("sluice_requests_total{") && l.contains("status=\"200\"")),
        "a 200 counted:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("sluice_requests_total{") && l.contains("status=\"400\"")),
        "a 400 counted:\n{text}"
    );
    h.stop().await;
}

/// `GET /metrics` as nobody, with `key`, and the message of a refusal.
async fn scrape(h: &Harness, key: Option<&str>) -> (u16, String) {
    let mut req = h.get("/metrics");
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, text)
}

/// Who may scrape, in each of the four setups (the full route table, with
/// tenants and every token set, is walked in `owners.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_token_is_enforced_in_every_setup() {
    let tenant = |c: &mut sluice_gateway::config::Config| {
        c.tenants.push(sluice_gateway::config::TenantConfig::new(
            "acme", "key-acme",
        ));
    };
    // Open (no tenants), no token: anyone, as the docs say.
    let h = Harness::start().await;
    assert_eq!(scrape(&h, None).await.0, 200);
    h.stop().await;

    // Open, with a token: only the token.
    let h = Harness::with(common::sim_config(), |c| {
        c.metrics.token = Some("scrape-me".into());
    })
    .await;
    assert_eq!(scrape(&h, None).await.0, 401);
    assert_eq!(scrape(&h, Some("guess")).await.0, 403);
    // The request counters are registered by the first request this test
    // binary makes: make one here, whichever test runs first.
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    let (status, text) = scrape(&h, Some("scrape-me")).await;
    assert_eq!(status, 200);
    assert!(text.contains("# TYPE sluice_requests_total"), "{text}");
    h.stop().await;

    // Tenants, no token at all: nobody, not even a tenant, and the
    // refusal says what to set.
    let h = Harness::with(common::sim_config(), tenant).await;
    for key in [None, Some("key-acme")] {
        let (status, text) = scrape(&h, key).await;
        assert_eq!(status, 403, "{key:?}");
        assert!(text.contains("metrics.token"), "{text}");
    }
    h.stop().await;

    // Tenants and only the admin token: the admin token scrapes.
    let h = Harness::with(common::sim_config(), |c| {
        tenant(c);
        c.admin_token = Some("the-operator".into());
    })
    .await;
    assert_eq!(scrape(&h, None).await.0, 401);
    assert_eq!(scrape(&h, Some("key-acme")).await.0, 403);
    assert_eq!(scrape(&h, Some("the-operator")).await.0, 200);
    h.stop().await;
}
