//! Capacity pools through the gateway, against the sim on 127.0.0.1: one
//! model name over two deployments (two providers at the sim, each with a
//! model of its own), each paced on its own resource; `ordered` overflow;
//! a failing deployment's calls sent to the other and its circuit opened,
//! then closed again by a probe once it answers; aliases; the catalog.

mod common;

use common::{Harness, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, Deployment, ModelPool, ProviderConfig, Strategy};
use sluice_sim::{Faults, Scope};

const POOL: &str = "openai/gpt-4o-mini";

fn deployment(provider: &str, model: &str, rate: f64, burst: u64) -> Deployment {
    Deployment {
        provider: provider.into(),
        model: Some(model.into()),
        requests_per_second: rate,
        burst,
        tokens_per_minute: None,
        max_in_flight: None,
        weight: 1,
    }
}

/// Providers `sim-a` and `sim-b` at the sim's OpenAI endpoints, and the
/// pool `openai/gpt-4o-mini` over their models `dep-a` and `dep-b`.
fn pooled(c: &mut Config, strategy: Strategy, a: Deployment, b: Deployment, open_ms: u64) {
    let openai = c
        .providers
        .iter()
        .find(|p| p.name == "openai")
        .unwrap()
        .clone();
    for name in ["sim-a", "sim-b"] {
        c.providers.push(ProviderConfig {
            name: name.into(),
            ..openai.clone()
        });
    }
    c.pools.push(ModelPool {
        model: POOL.into(),
        strategy,
        failures_to_open: 3,
        open_ms,
        deployments: vec![a, b],
    });
    c.aliases.insert("fast".into(), POOL.into());
    c.retry.max_attempts = 3;
}

async fn chat(h: &Harness, model: &str) -> reqwest::Response {
    h.send(
        "/v1/chat/completions",
        &json!({"model": model, "max_tokens": 4,
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
}

/// The pools `GET /v1/limits` shows.
async fn pools(h: &Harness) -> Vec<Value> {
    let res = h.get("/v1/limits").send().await.unwrap();
    let body: Value = res.json().await.unwrap();
    body["pools"].as_array().expect("a `pools` array").clone()
}

fn circuit(pools: &[Value], provider: &str) -> String {
    let d = pools[0]["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["provider"] == provider)
        .expect("the deployment");
    d["circuit"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_serves_its_name_from_both_deployments_and_lists_once() {
    let h = Harness::with(sim_config(), |c| {
        pooled(
            c,
            Strategy::Fill,
            deployment("sim-a", "dep-a", 1_000.0, 1_000),
            deployment("sim-b", "dep-b", 1_000.0, 1_000),
            60_000,
        );
    })
    .await;
    for _ in 0..40 {
        let res = chat(&h, POOL).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    // Through the alias too.
    let res = chat(&h, "fast").await;
    assert_eq!(res.status(), StatusCode::OK);
    let stats = h.sim.stats();
    let (a, b) = (stats.model("dep-a").ok, stats.model("dep-b").ok);
    assert_eq!(a + b, 41);
    // Equal weights and no waiting: the draw shares the calls.
    assert!(a > 0 && b > 0, "a {a}, b {b}");
    assert_eq!(stats.model("gpt-4o-mini").requests, 0, "never the prefix's");
    // Other `openai/…` models still go to the `openai` provider.
    let res = chat(&h, "openai/gpt-4o").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("gpt-4o").ok, 1);

    // Each deployment is a resource of its own.
    let pools = pools(&h).await;
    let resources: Vec<&str> = pools[0]["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["resource"].as_str().unwrap())
        .collect();
    assert_eq!(
        resources,
        ["deployment:sim-a/dep-a", "deployment:sim-b/dep-b"]
    );
    let served: u64 = pools[0]["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["served"].as_u64().unwrap())
        .sum();
    assert_eq!(served, 41);
    assert_eq!(pools[0]["model"], POOL);
    assert_eq!(pools[0]["strategy"], "fill");
    assert_eq!(circuit(&pools, "sim-a"), "closed");

    let res = h.get("/v1/models").send().await.unwrap();
    let list: Value = res.json().await.unwrap();
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.iter().filter(|i| **i == POOL).count(), 1, "{ids:?}");
    assert_eq!(ids.iter().filter(|i| **i == "fast").count(), 1, "{ids:?}");
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("sluice_pool_attempts_total{")
            && metrics.contains("deployment=\"sim-a/dep-a\""),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_sends_only_the_overflow_to_the_second() {
    // The first takes a burst of 4 and then one call per 100 s: the test
    // is over long before it refills.
    let h = Harness::with(sim_config(), |c| {
        pooled(
            c,
            Strategy::Ordered,
            deployment("sim-a", "dep-a", 0.01, 4),
            deployment("sim-b", "dep-b", 1_000.0, 1_000),
            60_000,
        );
    })
    .await;
    for _ in 0..4 {
        assert_eq!(chat(&h, POOL).await.status(), StatusCode::OK);
    }
    assert_eq!(h.sim.stats().model("dep-a").ok, 4);
    assert_eq!(h.sim.stats().model("dep-b").requests, 0, "below the limit");
    for _ in 0..6 {
        assert_eq!(chat(&h, POOL).await.status(), StatusCode::OK);
    }
    let stats = h.sim.stats();
    assert_eq!(stats.model("dep-a").ok, 4);
    assert_eq!(stats.model("dep-b").ok, 6, "exactly the overflow");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_deployment_is_taken_out_and_comes_back_after_a_probe() {
    let h = Harness::with(sim_config(), |c| {
        pooled(
            c,
            Strategy::Ordered,
            deployment("sim-a", "dep-a", 1_000.0, 1_000),
            deployment("sim-b", "dep-b", 1_000.0, 1_000),
            50,
        );
    })
    .await;
    let failing = Faults {
        error_rate: 1.0,
        error_statuses: vec![500],
        ..Faults::none()
    };
    h.sim
        .set_faults(Scope::Model("dep-a".into()), failing)
        .unwrap();
    // Every call is answered: the ones dep-a fails go to dep-b.
    for _ in 0..10 {
        let res = chat(&h, POOL).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let stats = h.sim.stats();
    assert!(stats.model("dep-a").server_errors >= 3);
    assert_eq!(stats.model("dep-b").ok, 10);
    let open = circuit(&pools(&h).await, "sim-a");
    assert!(open == "open" || open == "half_open", "{open}");

    // It answers again: a probe closes its circuit, and `ordered` sends
    // it the calls again.
    h.sim
        .set_faults(Scope::Model("dep-a".into()), Faults::none())
        .unwrap();
    let mut closed = false;
    for _ in 0..200 {
        assert_eq!(chat(&h, POOL).await.status(), StatusCode::OK);
        if circuit(&pools(&h).await, "sim-a") == "closed" {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(closed, "the circuit closes once dep-a answers");
    let before = h.sim.stats().model("dep-a").ok;
    assert_eq!(chat(&h, POOL).await.status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("dep-a").ok, before + 1);
    h.stop().await;
}

/// Two replicas with `[redis]` in front of the same two deployments of a
/// burst of 3 and one call per 100 s: together they send each deployment
/// its 3 and no more (each alone would have sent 6), and refuse the rest
/// with a 429 rather than let a deployment answer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_redis_share_each_deployments_limit() {
    let Some(url) = std::env::var("SLUICE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
        return;
    };
    let prefix = format!("pool{:x}:", fastrand::u64(..));
    let edit = |id: &'static str| {
        let (url, prefix) = (url.clone(), prefix.clone());
        move |c: &mut Config| {
            pooled(
                c,
                Strategy::Fill,
                deployment("sim-a", "dep-a", 0.01, 3),
                deployment("sim-b", "dep-b", 0.01, 3),
                60_000,
            );
            let mut redis = sluice_gateway::config::RedisSettings::new(url);
            redis.prefix = prefix;
            redis.replica_id = Some(id.into());
            c.redis = Some(redis);
        }
    };
    let h = Harness::with(sim_config(), edit("one")).await;
    let two = h.replica(edit("two")).await;
    let body = json!({"model": POOL, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}]});
    let mut ok = 0;
    let mut refused = 0;
    for i in 0..10 {
        let res = if i % 2 == 0 {
            h.send("/v1/chat/completions", &body).await
        } else {
            h.http
                .post(two.url("/v1/chat/completions"))
                .json(&body)
                .send()
                .await
                .unwrap()
        };
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("{other}: {}", res.text().await.unwrap()),
        }
    }
    assert_eq!((ok, refused), (6, 4));
    let stats = h.sim.stats();
    assert_eq!(stats.model("dep-a").ok, 3);
    assert_eq!(stats.model("dep-b").ok, 3);
    assert_eq!(
        stats.model("dep-a").rate_limited + stats.model("dep-b").rate_limited,
        0
    );
    h.stop().await;
}
