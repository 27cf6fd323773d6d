//! Hostile input on every route: arbitrary bytes, JSON of every wrong
//! shape (huge numbers, control characters, deep nesting, the right field
//! names with the wrong types), odd query strings and odd `x-sluice-*`
//! headers, each sent by a caller the route accepts. No answer may be a
//! 500 and no connection may drop without an answer (a handler that
//! panics drops it); the gateway keeps serving afterwards.
//!
//! Also: the configuration loader on mutated TOML never panics.
//!
//! A property test with a fixed number of cases per run (`PROPTEST_CASES`
//! raises it; `SLUICE_TEST_FUZZ_SECONDS` keeps the route test drawing
//! fresh cases for that long); the long runs by hand are in
//! `docs/reliability.md`.

mod common;

use common::{Harness, concrete, sim_config};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value};
use sluice_gateway::auth::Owner;
use sluice_gateway::config::{self, Config, TenantConfig};
use sluice_gateway::routes::{RouteOwner, owners};

const TENANT: &str = "key-acme";
const ADMIN: &str = "the-operator";
const SCRAPER: &str = "the-scraper";

/// Field names the routes read, so that hostile values land where they
/// are looked at, not only in keys nobody reads.
const FIELDS: &[&str] = &[
    "model",
    "messages",
    "role",
    "content",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n",
    "stream",
    "stream_options",
    "include_usage",
    "input",
    "tools",
    "system",
    "instructions",
    "prompt",
    "dimensions",
    "queue",
    "kind",
    "payload",
    "api",
    "method",
    "path",
    "body",
    "headers",
    "max_attempts",
    "priority",
    "group",
    "idempotency_key",
    "run_at",
    "delay_ms",
    "jobs",
    "resource",
    "resources",
    "cost",
    "costs",
    "tokens",
    "timeout_ms",
    "grant_id",
    "status",
    "retry_after",
    "capacity",
    "requests_per_second",
    "burst",
    "used",
    "guild_id",
    "channel_id",
    "name",
];

/// Values that are valid somewhere, so that a case gets past the first check.
const NAMES: &[&str] = &[
    "openai/gpt-4o-mini",
    "anthropic/claude-3-5-haiku",
    "openai/",
    "default",
    "http",
    "slack",
    "discord.create_role",
    "openai",
    "api:slack",
    "user",
    "assistant",
    "POST",
    "/",
    "1",
    "",
];

const HEADERS: &[&str] = &[
    "x-sluice-priority",
    "x-sluice-timeout-ms",
    "x-sluice-thread",
    "x-sluice-workspace",
    "x-request-id",
    "idempotency-key",
    "content-type",
    "traceparent",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![u64::MAX, u64::MAX - 1, 1 << 53, 1_000_000, 0])
            .prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
        "[\\x00-\\x1f\\x7f\u{fffd}\u{202e}]{0,8}".prop_map(Value::from),
        prop::sample::select(NAMES).prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(FIELDS).prop_map(str::to_owned),
        1 => "\\PC{0,12}",
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A request body: mostly a JSON object with known fields, sometimes any
/// JSON, sometimes bytes that are not JSON at all.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        5 => prop::collection::btree_map(key(), json(), 0..10).prop_map(|m| {
            Value::Object(m.into_iter().collect::<Map<_, _>>()).to_string().into_bytes()
        }),
        2 => json().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..512),
        1 => "[{\\[\"a-z0-9:,. ]{0,64}".prop_map(String::into_bytes),
    ]
}

/// Query strings for the routes that read one (`GET /v1/jobs`); others
/// ignore them.
fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        prop::collection::vec(
            (
                prop::sample::select(vec!["queue", "state", "after", "limit", "x"]),
                "[ -~]{0,24}",
            ),
            0..4,
        )
        .prop_map(|pairs| {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in pairs {
                q.append_pair(k, &v);
            }
            format!("?{}", q.finish())
        }),
    ]
}

fn headers() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    prop::collection::vec((prop::sample::select(HEADERS), "[ -~]{0,40}"), 0..4)
}

#[derive(Debug, Clone)]
struct Case {
    route: usize,
    body: Vec<u8>,
    query: String,
    headers: Vec<(&'static str, String)>,
}

fn key_for(owner: &Owner) -> Option<&'static str> {
    match owner {
        Owner::Tenant => Some(TENANT),
        Owner::Admin => Some(ADMIN),
        Owner::Scraper => Some(SCRAPER),
        _ => None,
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

async fn send(h: &Harness, route: &RouteOwner, case: &Case) -> Result<u16, String> {
    let method = route.method.clone().unwrap_or(Method::POST);
    let url = h.url(&format!("{}{}", concrete(route.path), case.query));
    let mut req = h.http.request(method, url).body(case.body.clone());
    let mut typed = false;
    for (name, value) in &case.headers {
        typed |= *name == "content-type";
        req = req.header(*name, value.as_str());
    }
    if !typed {
        req = req.header("content-type", "application/json");
    }
    if let Some(k) = key_for(&route.owner) {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.map_err(|e| format!("no answer: {e}"))?;
    let status = res.status().as_u16();
    // An event stream that opened (the job events) never ends by itself:
    // its head is the answer.
    let streams = res
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if status == 200 && streams {
        return Ok(status);
    }
    let text = res.text().await.map_err(|e| format!("body cut: {e}"))?;
    if status == 500 {
        return Err(format!("500: {text}"));
    }
    Ok(status)
}

#[test]
fn no_route_answers_hostile_input_with_a_500_or_a_dropped_connection() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let h = rt.block_on(Harness::with(sim_config(), |c| {
        c.tenants.push(TenantConfig::new("acme", TENANT));
        c.admin_token = Some(ADMIN.into());
        c.metrics.token = Some(SCRAPER.into());
        // The jobs that happen to be valid run against the sim: keep them
        // few and short.
        c.default_timeout_ms = 5_000;
    }));
    let routes = owners();
    let strategy =
        (0..routes.len(), body(), query(), headers()).prop_map(|(route, body, query, headers)| {
            Case {
                route,
                body,
                query,
                headers,
            }
        });
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u32>::new());
    // `SLUICE_TEST_FUZZ_SECONDS`: keep drawing fresh rounds of cases for
    // that long (the long run by hand); otherwise one round.
    let budget = std::env::var("SLUICE_TEST_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_secs);
    let started = std::time::Instant::now();
    loop {
        let mut runner = TestRunner::new(RunnerConfig {
            cases: cases(),
            failure_persistence: None,
            ..RunnerConfig::default()
        });
        let outcome = runner.run(&strategy, |case| {
            let route = &routes[case.route];
            let status = rt
                .block_on(send(&h, route, &case))
                .map_err(|e| TestCaseError::fail(format!("{} {}: {e}", route.path, case.query)))?;
            *statuses.lock().unwrap().entry(status).or_default() += 1;
            Ok(())
        });
        if let Err(e) = outcome {
            panic!("{e}");
        }
        if budget.is_none_or(|b| started.elapsed() >= b) {
            break;
        }
    }
    eprintln!("statuses seen: {:?}", statuses.lock().unwrap());
    let alive = rt
        .block_on(async { h.get("/healthz").send().await })
        .expect("still serving");
    assert_eq!(alive.status().as_u16(), 200);
    rt.block_on(h.stop());
}

/// A line of the effective default configuration with its value replaced.
fn mutated_toml() -> impl Strategy<Value = String> {
    let defaults = Config::default().to_toml();
    let lines: Vec<String> = defaults.lines().map(str::to_owned).collect();
    let n = lines.len();
    let value = prop_oneof![
        Just("18446744073709551615".to_owned()),
        Just("-1".to_owned()),
        Just("1e308".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("\"\"".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        "\\PC{0,20}".prop_map(|s| format!("{s:?}")),
        "[ -~]{0,20}",
    ];
    (prop::collection::vec((0..n, value), 1..6), any::<bool>()).prop_map(move |(edits, dup)| {
        let mut out = lines.clone();
        for (i, v) in edits {
            if let Some((k, _)) = out[i].split_once(" = ") {
                out[i] = format!("{k} = {v}");
            } else if dup {
                out[i] = format!("{}\n{}", out[i], out[i]);
            }
        }
        out.join("\n")
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_config_loader_never_panics(text in mutated_toml()) {
        let _ = config::load_str(&text, "fuzz.toml", Vec::new());
    }

    #[test]
    fn the_config_loader_never_panics_on_any_text(text in "\\PC{0,400}") {
        let _ = config::load_str(&text, "fuzz.toml", Vec::new());
    }
}

/// Found by the test above: `PUT /v1/limits/{resource}` with a huge
/// capacity and window overflowed the token bucket's arithmetic, and the
/// resource panicked every request after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_limit_is_refused_by_name_and_the_largest_one_works() {
    let h = Harness::with(sim_config(), |c| {
        c.tenants.push(TenantConfig::new("acme", TENANT));
        c.admin_token = Some(ADMIN.into());
    })
    .await;
    let put = |body: Value| {
        h.http
            .put(h.url("/v1/limits/openai%2Fgpt-4o-mini"))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };
    for (body, names) in [
        (
            serde_json::json!({"capacity": u64::MAX, "window_ms": u64::MAX}),
            "capacity",
        ),
        (
            serde_json::json!({"capacity": 1, "window_ms": u64::MAX}),
            "window",
        ),
    ] {
        let res = put(body.clone()).await.expect("an answer");
        assert_eq!(res.status().as_u16(), 400, "{body}");
        let text = res.text().await.unwrap();
        assert!(text.contains(names), "{body}: {text}");
    }
    let largest = serde_json::json!({
        "capacity": sluice_limit::MAX_CAPACITY,
        "window_ms": sluice_limit::MAX_WINDOW.as_millis() as u64,
    });
    let res = put(largest).await.expect("an answer");
    assert_eq!(res.status().as_u16(), 200, "{}", res.text().await.unwrap());
    for _ in 0..3 {
        let res = h
            .http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(TENANT)
            .json(&common::chat("openai/gpt-4o-mini"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(res.status().as_u16(), 200);
    }
    h.stop().await;
}
