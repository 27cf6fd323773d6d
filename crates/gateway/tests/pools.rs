//! Capacity pools through the gateway, against the sim on 127.0.0.1: one
//! model name over two deployments (two providers at the sim, each with a
//! model of its own), each paced on its own resource; `ordered` overflow;
//! a failing deployment's calls sent to the other and its circuit opened,
//! then closed again by a probe once it answers; aliases; the catalog.

mod common;

use common::{ACME, GLOBEX, Harness, sim_config, two_tenants};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{
    Config, Deployment, ModelPool, ProviderConfig, Strategy, TenantProvider,
};
use sluice_gateway::dashboard::view::Snapshot;
use sluice_sim::{Faults, Scope, SimConfig};

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

/// The test Redis (`scripts/test` starts one), or `None` with a note.
fn redis_url() -> Option<String> {
    let url = std::env::var("SLUICE_TEST_REDIS_URL").ok();
    let url = url.filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
    }
    url
}

/// `c` shares its limits and circuits through the Redis at `url`, under
/// `prefix`, as replica `id`.
fn on_redis(c: &mut Config, url: String, prefix: String, id: &str) {
    let mut redis = sluice_gateway::config::RedisSettings::new(url);
    redis.prefix = prefix;
    redis.replica_id = Some(id.into());
    c.redis = Some(redis);
}

/// Two replicas with `[redis]` in front of the same two deployments of a
/// burst of 3 and one call per 100 s: together they send each deployment
/// its 3 and no more (each alone would have sent 6), and refuse the rest
/// with a 429 rather than let a deployment answer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_redis_share_each_deployments_limit() {
    let Some(url) = redis_url() else { return };
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
            on_redis(c, url, prefix, id);
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

/// The circuit of replica `base`'s deployment `provider`, read until it
/// is one of `want` (for at most 1,000 looks 10 ms apart: the bus's
/// notice takes milliseconds; a bound, not a timing claim).
async fn circuit_becomes(
    http: &reqwest::Client,
    base: &str,
    provider: &str,
    want: &[&str],
) -> String {
    let mut seen = String::new();
    for _ in 0..1_000 {
        let res = http.get(format!("{base}/v1/limits")).send().await.unwrap();
        let body: Value = res.json().await.unwrap();
        seen = circuit(body["pools"].as_array().unwrap(), provider);
        if want.contains(&seen.as_str()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    seen
}

/// A chat call for the pool through the gateway at `base`.
async fn chat_at(http: &reqwest::Client, base: &str) -> StatusCode {
    let body = json!({"model": POOL, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{base}/v1/chat/completions");
    http.post(url).json(&body).send().await.unwrap().status()
}

/// With `[redis]`, a circuit one replica opens is open on the others: a
/// replica that never called the failing deployment sends it nothing
/// (with `ordered` it would try it first), and a replica started after
/// it opened reads it from Redis. The one replica that probes it and is
/// answered closes it for all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_redis_share_each_deployments_circuit() {
    let Some(url) = redis_url() else { return };
    let edit = |prefix: &str, id: &'static str, open_ms: u64| {
        let (url, prefix) = (url.clone(), prefix.to_owned());
        move |c: &mut Config| {
            pooled(
                c,
                Strategy::Ordered,
                deployment("sim-a", "dep-a", 1_000.0, 1_000),
                deployment("sim-b", "dep-b", 1_000.0, 1_000),
                open_ms,
            );
            on_redis(c, url, prefix, id);
        }
    };
    let failing = || Faults {
        error_rate: 1.0,
        error_statuses: vec![500],
        ..Faults::none()
    };
    let dep_a = || Scope::Model("dep-a".into());
    let (open, not_closed) = (&["open"][..], &["open", "half_open"][..]);

    // Open for a minute: replica one opens dep-a's circuit (3 failures
    // in a row), replica two hears of it and sends it nothing.
    let first = format!("circuit{:x}:", fastrand::u64(..));
    let h = Harness::with(sim_config(), edit(&first, "one", 60_000)).await;
    let two = h.replica(edit(&first, "two", 60_000)).await;
    h.sim.set_faults(dep_a(), failing()).unwrap();
    for _ in 0..3 {
        assert_eq!(chat(&h, POOL).await.status(), StatusCode::OK);
    }
    assert_eq!(circuit(&pools(&h).await, "sim-a"), "open");
    let seen = circuit_becomes(&h.http, &two.url(""), "sim-a", open).await;
    assert_eq!(
        seen, "open",
        "replica two hears that dep-a's circuit opened"
    );
    let failed = h.sim.stats().model("dep-a").server_errors;
    for _ in 0..5 {
        assert_eq!(chat_at(&h.http, &two.url("")).await, StatusCode::OK);
    }
    assert_eq!(
        h.sim.stats().model("dep-a").server_errors,
        failed,
        "replica two sent dep-a nothing while its circuit is open"
    );
    // A replica started now reads the open circuit from Redis.
    let three = h.replica(edit(&first, "three", 60_000)).await;
    let seen = circuit_becomes(&h.http, &three.url(""), "sim-a", open).await;
    assert_eq!(seen, "open", "replica three read the open circuit at start");
    drop((two, three));

    // Open for 100 ms: replica four opens it, five hears of it; once
    // dep-a answers again, four's answered probe closes it on five too
    // (five, which makes no call, would stay half open by itself).
    let second = format!("circuit{:x}:", fastrand::u64(..));
    let four = h.replica(edit(&second, "four", 100)).await;
    let five = h.replica(edit(&second, "five", 100)).await;
    for _ in 0..3 {
        assert_eq!(chat_at(&h.http, &four.url("")).await, StatusCode::OK);
    }
    let seen = circuit_becomes(&h.http, &five.url(""), "sim-a", not_closed).await;
    assert!(not_closed.contains(&seen.as_str()), "{seen}");
    h.sim.set_faults(dep_a(), Faults::none()).unwrap();
    let answered = h.sim.stats().model("dep-a").ok;
    let mut probed = false;
    for _ in 0..200 {
        assert_eq!(chat_at(&h.http, &four.url("")).await, StatusCode::OK);
        if h.sim.stats().model("dep-a").ok > answered {
            probed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        probed,
        "replica four probes dep-a once its open time passed"
    );
    let seen = circuit_becomes(&h.http, &five.url(""), "sim-a", &["closed"]).await;
    assert_eq!(seen, "closed", "four's answered probe closes it on five");
    drop((four, five));
    h.stop().await;
}

/// Every file under `dir`, read whole (lossily).
fn every_file(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            every_file(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
}

/// A tenant's own key for one deployment (`[tenants.providers.sim-a]`)
/// goes to that deployment with its calls; another tenant's calls there
/// carry the provider's key. The ledger records the alias called and the
/// deployment that served; the dashboard lists the deployments. No key
/// shows in an answer, `GET /v1/limits`, the metrics, the dashboard, the
/// request log, the traces or the ledger's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_key_for_a_deployment_goes_there_and_shows_nowhere() {
    const OWN: &str = "sk-acme-own-1f2e3d";
    const SHARED: &str = "sk-shared-9c8b7a";
    const VIEWER: &str = "viewer-token";
    const ADMIN: &str = "admin-token";
    // The sim takes acme's own key only.
    let sim = SimConfig {
        api_key: Some(OWN.into()),
        ..sim_config()
    };
    let h = Harness::with(sim, |c| {
        pooled(
            c,
            Strategy::Ordered,
            deployment("sim-a", "dep-a", 1_000.0, 1_000),
            deployment("sim-b", "dep-b", 1_000.0, 1_000),
            60_000,
        );
        two_tenants(c);
        c.ui.token = Some(VIEWER.into());
        c.admin_token = Some(ADMIN.into());
        c.trace.enabled = true;
        c.secrets.insert("SHARED_KEY", SHARED);
        c.secrets.insert("ACME_A", OWN);
        for p in c
            .providers
            .iter_mut()
            .filter(|p| p.name.starts_with("sim-"))
        {
            p.api_key_env = Some("SHARED_KEY".into());
        }
        let own = TenantProvider {
            api_key_env: "ACME_A".into(),
        };
        c.tenants[0].providers.insert("sim-a".into(), own);
    })
    .await;
    let call = |key: &'static str| {
        let body = json!({"model": "fast", "max_tokens": 4,
            "messages": [{"role": "user", "content": "hi"}]});
        h.post("/v1/chat/completions", &body)
            .bearer_auth(key)
            .send()
    };
    let mut answers = Vec::new();
    let res = call(ACME).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "acme's own key reached dep-a");
    answers.push(res.text().await.unwrap());
    // Globex has none: the provider's key went to dep-a, which the sim
    // refused (a 401 is the client's answer, not a failing deployment).
    let res = call(GLOBEX).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    answers.push(res.text().await.unwrap());
    assert_eq!(h.sim.stats().model("dep-a").ok, 1);

    // The ledger: acme's call under the pool's name, the alias it
    // called and the deployment that served it.
    let mut record = Value::Null;
    for _ in 0..500 {
        let log = h.get_json("/v1/requests", ACME).await;
        if let Some(r) = log["requests"].as_array().and_then(|r| r.first()) {
            record = r.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(record["model"], POOL, "{record}");
    assert_eq!(record["alias"], "fast", "{record}");
    assert_eq!(record["deployment"], "sim-a/dep-a", "{record}");
    assert_eq!(record["provider"], "sim-a", "{record}");
    answers.push(record.to_string());

    // The dashboard lists both deployments (a snapshot a second).
    let mut snapshot = Snapshot::default();
    for _ in 0..100 {
        let v = h.get_json("/v1/dashboard", VIEWER).await;
        answers.push(v.to_string());
        snapshot = serde_json::from_value(v).expect("a snapshot");
        if snapshot
            .pools
            .first()
            .is_some_and(|p| p.deployments[0].served > 0)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let pool = &snapshot.pools[0];
    assert_eq!(pool.model, POOL);
    assert_eq!(pool.strategy, "ordered");
    let names: Vec<String> = (pool.deployments.iter())
        .map(|d| format!("{}/{} {}", d.provider, d.model, d.circuit))
        .collect();
    assert_eq!(names, ["sim-a/dep-a closed", "sim-b/dep-b closed"]);
    let row = snapshot
        .resources
        .iter()
        .find(|r| r.resource == "deployment:sim-a/dep-a")
        .expect("dep-a's limits among the resources");
    assert_eq!(row.kind, "deployment");
    assert_eq!(row.configured_per_second, Some(1_000.0));

    answers.push(h.get_json("/v1/limits", ACME).await.to_string());
    let metrics = h.get("/metrics").bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(metrics.status(), StatusCode::OK);
    answers.push(metrics.text().await.unwrap());
    // Stopped (traces and ledger written out), its files still there.
    let mut h = h;
    h.shutdown().await;
    let mut files = Vec::new();
    every_file(&h.trace_dir, &mut files);
    every_file(&h.data_dir, &mut files);
    assert!(
        files.iter().any(|(_, text)| text.contains("sim-a/dep-a")),
        "the traces name the deployment"
    );
    for key in [OWN, SHARED] {
        for text in &answers {
            assert!(!text.contains(key), "a key in an answer: {text}");
        }
        for (path, text) in &files {
            assert!(!text.contains(key), "a key in {}", path.display());
        }
    }
    h.stop().await;
}
