//! Issue 18's findings about tenants, each tried as a hostile tenant
//! would: sessions, `GET /v1/limits`, the limiter API's fairness and depth
//! limits, held grants, deduplication across tenants, and what a gateway
//! without tenants says about itself.

mod common;

use common::{
    ACME, GLOBEX, Harness, ModelLimits, chat, expect_error, model_limits, sim_config, sim_model,
    two_tenants, wait_until,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::Latency;

async fn chat_as(h: &Harness, key: &str, thread: &str) -> reqwest::Response {
    h.post("/v1/chat/completions", &chat("openai/gpt-4o"))
        .bearer_auth(key)
        .header("x-sluice-thread", thread)
        .header("x-sluice-timeout-ms", "100")
        .send()
        .await
        .unwrap()
}

async fn limits_as(h: &Harness, key: &str) -> Vec<String> {
    let res = h.get("/v1/limits").bearer_auth(key).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap().to_owned())
        .collect()
}

async fn acquire_as(h: &Harness, key: &str, body: Value) -> reqwest::Response {
    h.post("/v1/limits/acquire", &body)
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

/// Found: session buckets were keyed by thread id only, and listed to
/// anyone: one tenant could drain another's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_the_tenants_own_and_listed_only_to_it() {
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.sessions.requests = 2;
    })
    .await;
    // globex drains "its" session t-1, through the limiter API too.
    for _ in 0..2 {
        assert_eq!(chat_as(&h, GLOBEX, "t-1").await.status(), StatusCode::OK);
    }
    expect_error(chat_as(&h, GLOBEX, "t-1").await, 429, "rate_limited").await;
    let res = acquire_as(&h, GLOBEX, json!({"resource": "session:t-1"})).await;
    expect_error(res, 429, "rate_limited").await;
    // acme's session of the same name is untouched.
    assert_eq!(chat_as(&h, ACME, "t-1").await.status(), StatusCode::OK);
    // Each sees its own session, by the name it gave it; neither sees the
    // other's; anonymous callers see nothing.
    let acme = limits_as(&h, ACME).await;
    let globex = limits_as(&h, GLOBEX).await;
    assert!(acme.contains(&"session:t-1".to_owned()), "{acme:?}");
    assert!(globex.contains(&"session:t-1".to_owned()), "{globex:?}");
    for list in [&acme, &globex] {
        assert_eq!(
            list.iter().filter(|r| r.starts_with("session:")).count(),
            1,
            "{list:?}"
        );
        assert!(
            !list
                .iter()
                .any(|r| r.contains("acme") || r.contains("globex")),
            "{list:?}"
        );
    }
    let res = h.get("/v1/limits").send().await.unwrap();
    expect_error(res, 401, "invalid_api_key").await;
    // Naming the other's internal name reaches nothing of the other's.
    let res = acquire_as(&h, ACME, json!({"resource": "session:globex:t-1"})).await;
    assert_eq!(res.status(), StatusCode::OK);
    expect_error(chat_as(&h, GLOBEX, "t-1").await, 429, "rate_limited").await;
    h.stop().await;
}

/// Found: the limiter API skipped admission fairness and per-tenant depth
/// limits, so one tenant could take every FIFO place of a model. Now its
/// waiting acquires count against its depth limit in the model's lane,
/// and another tenant still gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_take_every_place_in_a_models_queue() {
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.queue.max_depth_per_tenant = 2.try_into().unwrap();
        c.queue.concurrency = 1.try_into().unwrap();
        c.models.push(ModelLimits {
            max_in_flight: Some(1),
            ..model_limits("openai/one")
        });
    })
    .await;
    let slot = json!({"resource": "inflight:openai/one"});
    let held = acquire_as(&h, ACME, slot.clone()).await;
    assert_eq!(held.status(), StatusCode::OK);
    let held: Value = held.json().await.unwrap();
    // acme now floods the model with waiting acquires: one waits in the
    // limiter (the lane's one slot), two in the admission queue (its
    // depth), and the rest are refused at once.
    let waiting = json!({"resource": "inflight:openai/one", "timeout_ms": 10_000});
    // Each, once granted, hands the slot on at once.
    let take_and_give_back = |key: &'static str| {
        let (http, body) = (h.http.clone(), waiting.clone());
        let (acquire, release) = (h.url("/v1/limits/acquire"), h.url("/v1/limits/release"));
        tokio::spawn(async move {
            let res = http
                .post(acquire)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = res.status();
            if status == StatusCode::OK {
                let g: Value = res.json().await.unwrap();
                let body = json!({"grant_id": g["grant_id"]});
                http.post(release)
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
            }
            status
        })
    };
    let flood: Vec<_> = (0..3).map(|_| take_and_give_back(ACME)).collect();
    wait_until("acme's three acquires wait", || async {
        h.queued().await == 2
    })
    .await;
    for _ in 0..3 {
        let res = acquire_as(&h, ACME, waiting.clone()).await;
        let e = expect_error(res, 429, "queue_full").await;
        assert!(e["message"].as_str().unwrap().contains("tenant"), "{e}");
    }
    // globex still gets a place.
    let globex = take_and_give_back(GLOBEX);
    wait_until("globex waits too", || async { h.queued().await == 3 }).await;
    // Handing the slot on serves everyone in turn.
    let res = h
        .post("/v1/limits/release", &json!({"grant_id": held["grant_id"]}))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(globex.await.unwrap(), StatusCode::OK);
    for t in flood {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    h.stop().await;
}

/// A tenant holds at most `limits_api.max_held_per_tenant` grants: it
/// cannot sit on every slot of every resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_grants_are_bounded_per_tenant() {
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.limits_api.max_held_per_tenant = 3;
    })
    .await;
    let body = json!({"model": "openai/gpt-4o"});
    let mut ids = Vec::new();
    for _ in 0..3 {
        let res = acquire_as(&h, ACME, body.clone()).await;
        assert_eq!(res.status(), StatusCode::OK);
        ids.push(res.json::<Value>().await.unwrap()["grant_id"].clone());
    }
    expect_error(
        acquire_as(&h, ACME, body.clone()).await,
        429,
        "rate_limited",
    )
    .await;
    assert_eq!(
        acquire_as(&h, GLOBEX, body.clone()).await.status(),
        StatusCode::OK
    );
    // One released, one more may be taken.
    let res = h
        .post("/v1/limits/release", &json!({"grant_id": ids[0]}))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(acquire_as(&h, ACME, body).await.status(), StatusCode::OK);
    h.stop().await;
}

/// Found (without tenants): a caller could join another workspace's
/// in-flight request by its id. With tenants the id is the tenant's own:
/// the same `x-request-id` from another tenant runs on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_joins_only_the_same_tenants_request() {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 300,
        ..Latency::default()
    };
    sim.models.insert("slow".into(), sim_model(slow, None));
    let h = Harness::with(sim, two_tenants).await;
    let send = |key: &'static str| {
        h.post("/v1/chat/completions", &chat("openai/slow"))
            .bearer_auth(key)
            .header("x-request-id", "req-shared")
            .send()
    };
    let second = async {
        wait_until("acme's request reaches the sim", || async {
            h.sim.stats().model("slow").requests == 1
        })
        .await;
        send(GLOBEX).await
    };
    let (a, b) = tokio::join!(send(ACME), second);
    assert_eq!(a.unwrap().status(), StatusCode::OK);
    assert_eq!(b.unwrap().status(), StatusCode::OK);
    assert_eq!(
        h.sim.stats().model("slow").requests,
        2,
        "two calls, not one shared"
    );
    h.stop().await;
}

/// Found: without `[[tenants]]` there is no authentication at all. That
/// is allowed (one user, loopback), and said: `/readyz` tells, and with
/// tenants it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_when_nobody_is_authenticated() {
    let h = Harness::start().await;
    let body: Value = h.get("/readyz").send().await.unwrap().json().await.unwrap();
    assert_eq!(body["ready"], true, "{body}");
    assert!(body["auth"].as_str().unwrap().starts_with("none"), "{body}");
    let warnings = body["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("no [[tenants]]")),
        "{body}"
    );
    h.stop().await;

    let h = Harness::with(sim_config(), two_tenants).await;
    let body: Value = h.get("/readyz").send().await.unwrap().json().await.unwrap();
    assert_eq!(body["auth"], "tenant keys", "{body}");
    assert_eq!(body["warnings"], json!([]), "{body}");
    h.stop().await;
}
