//! Budgets against `sluice sim`: calls reserve their worst case and
//! settle to what they used, 50 calls at once never spend more than the
//! budget (on one gateway, and on two sharing Redis), a refusal names the
//! budget and when it resets, answers carry what is left, and a change to
//! a tier reaches its members.

mod common;

use std::sync::Arc;

use common::keys::{admin, chat_as, fresh_schema, issue, message, redis_url, shared, with_admin};
use common::{Harness, chat, header, sim_config, sim_model};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::Config;
use sluice_sim::{Latency, SimConfig};
use sluice_usage::{PriceTable, Usage};

/// A sim model the price table prices as gpt-4o-mini ($0.15 in, $0.60 out
/// per million tokens) that answers 100 tokens after 300 ms.
const MODEL: &str = "openai/gpt-4o-mini-slow";
/// Each call allows 1,000 completion tokens: its worst case.
const MAX_TOKENS: u64 = 1_000;
/// The gateway's estimate of the prompt of `chat()`: 3 (request) + 4
/// (message) + 3 ("hello there", 11 characters at 4 a token).
const PROMPT_ESTIMATE: u64 = 10;

/// A call's worst case in nanodollars: 10 × 150 + 1,000 × 600 pico$ ×
/// 1e-3.
fn worst_case() -> u64 {
    let u = Usage {
        prompt_tokens: PROMPT_ESTIMATE,
        completion_tokens: MAX_TOKENS,
        total_tokens: PROMPT_ESTIMATE + MAX_TOKENS,
    };
    // The slow model is priced as gpt-4o-mini (see `wide`).
    PriceTable::defaults()
        .cost("openai/gpt-4o-mini", &u, 0)
        .unwrap()
        .nanodollars()
}

fn slow_sim() -> SimConfig {
    let mut sim = sim_config();
    let slow = Latency {
        base_ms: 300,
        ..Latency::default()
    };
    sim.models
        .insert("gpt-4o-mini-slow".into(), sim_model(slow, Some(100)));
    sim
}

fn wide(c: &mut Config) {
    with_admin(c);
    // A price of its own: a prefix prices only a model and its snapshots
    // (issue 33), and `-slow` is neither.
    c.prices.insert(
        MODEL.into(),
        sluice_gateway::config::PriceConfig {
            input: sluice_gateway::config::Dollars("0.15".into()),
            output: sluice_gateway::config::Dollars("0.60".into()),
            cached_input: None,
        },
    );
    c.queue.concurrency = std::num::NonZeroUsize::new(64).unwrap();
}

/// Dollars as the API reads them, from nanodollars.
fn dollars(nanos: u64) -> String {
    format!("{}.{:09}", nanos / 1_000_000_000, nanos % 1_000_000_000)
}

/// A tenant with a money budget of ten calls' worst case, and its key.
async fn tenant_with_ten_calls(base: &str, name: &str) -> (String, u64) {
    let budget = 10 * worst_case();
    admin(
        base,
        "POST",
        "/v1/tenants",
        json!({"name": name, "budgets": [{"name": "monthly", "money": dollars(budget), "period": "month", "time_zone": "Europe/Paris"}]}),
    )
    .await;
    let (key, _) = issue(base, json!({"tenant": name})).await;
    (key, budget)
}

/// What an answer cost at the price table, from the usage it reports.
fn cost_of(body: &Value) -> u64 {
    let u = Usage {
        prompt_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap(),
        completion_tokens: body["usage"]["completion_tokens"].as_u64().unwrap(),
        total_tokens: body["usage"]["total_tokens"].as_u64().unwrap(),
    };
    // The slow model is priced as gpt-4o-mini (see `wide`).
    PriceTable::defaults()
        .cost("openai/gpt-4o-mini", &u, 0)
        .unwrap()
        .nanodollars()
}

/// A call of `MODEL` allowing `MAX_TOKENS`, as `key`, to `base`.
async fn send(h: &Harness, base: &str, key: &str) -> reqwest::Response {
    let mut body = chat(MODEL);
    body["max_tokens"] = json!(MAX_TOKENS);
    send_body(h, base, key, &body).await
}

/// A chat completion of `body`, as `key`, to `base`.
async fn send_body(h: &Harness, base: &str, key: &str, body: &Value) -> reqwest::Response {
    h.http
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Sends 50 calls at once, `bases` taking turns; returns the answers.
async fn fifty_at_once(
    h: &Arc<Harness>,
    bases: &[String],
    key: &str,
) -> Vec<(StatusCode, Value, String)> {
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (h, base, key) = (h.clone(), bases[i % bases.len()].clone(), key.to_owned());
            tokio::spawn(async move {
                let res = send(&h, &base, &key).await;
                let status = res.status();
                let left = res
                    .headers()
                    .get("x-sluice-budget-remaining")
                    .or_else(|| res.headers().get("retry-after"))
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                (status, res.json().await.unwrap_or(Value::Null), left)
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// The overshoot bound: 50 calls at once against a budget of ten worst
/// cases. At most ten reservations fit at once, so at most ten run; what
/// they spend (priced from the usage the sim reports) stays within the
/// budget; the rest are refused naming the budget, with `Retry-After`.
fn check_fifty(answers: &[(StatusCode, Value, String)], budget: u64) -> u64 {
    let mut spent = 0;
    let mut ok = 0;
    for (status, body, header) in answers {
        match *status {
            StatusCode::OK => {
                ok += 1;
                spent += cost_of(body);
                assert!(header.contains("budget=\"tenant:"), "{header}");
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
                let m = body["error"]["message"].as_str().unwrap();
                assert!(m.contains("budget \"monthly\" of tenant"), "{m}");
                assert!(header.parse::<u64>().unwrap() >= 1, "Retry-After {header}");
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    println!(
        "{ok} of 50 ran, spent {} of a budget of {} (worst case {} each)",
        dollars(spent),
        dollars(budget),
        dollars(worst_case())
    );
    // Ten fit at once; more only once some settled.
    assert!((10..50).contains(&ok), "{ok} ran");
    assert!(spent <= budget, "spent {spent} of {budget}");
    spent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_calls_at_once_never_spend_more_than_the_budget() {
    let h = Arc::new(Harness::with(slow_sim(), wide).await);
    let base = h.url("");
    let (key, budget) = tenant_with_ten_calls(&base, "acme").await;
    let answers = fifty_at_once(&h, std::slice::from_ref(&base), &key).await;
    let mut spent = check_fifty(&answers, budget);

    // Each used a tenth of its worst case and gave the rest back: calls
    // one at a time go on until the budget itself is near spent.
    let mut more = 0;
    loop {
        let res = send(&h, &base, &key).await;
        if res.status() != StatusCode::OK {
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
            break;
        }
        spent += cost_of(&res.json().await.unwrap());
        more += 1;
        assert!(more < 200, "the budget never ran out");
    }
    // Refused only when the worst case no longer fits what is left.
    assert!(spent <= budget, "spent {spent} of {budget}");
    assert!(
        spent + worst_case() > budget,
        "refused with {spent} of {budget} spent"
    );
    println!("then {more} more, one at a time: spent {}", dollars(spent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_sharing_redis_share_the_budget() {
    let Some(redis) = redis_url() else {
        panic!("SLUICE_TEST_REDIS_URL is not set: budgets shared by replicas need a redis-server");
    };
    let schema = fresh_schema().await;
    let store = schema.url.clone();
    let prefix = format!("bgw{:x}:", fastrand::u64(..));
    let setup = |id: &'static str| {
        let s = shared(&redis, &prefix, id, &store);
        move |c: &mut Config| {
            s(c);
            wide(c);
        }
    };
    let a = Harness::with(slow_sim(), setup("a")).await;
    let b = a.replica(setup("b")).await;
    let a = Arc::new(a);
    let bases = [a.url(""), format!("http://{}", b.addr)];
    let (key, budget) = tenant_with_ten_calls(&bases[0], "acme").await;
    let answers = fifty_at_once(&a, &bases, &key).await;
    check_fifty(&answers, budget);
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_change_reaches_its_members_and_answers_say_what_is_left() {
    let h = Harness::with(sim_config(), with_admin).await;
    let base = h.url("");
    admin(
        &base,
        "POST",
        "/v1/tiers",
        json!({"name": "free", "budgets": [{"name": "daily", "requests": 2, "period": "day"}]}),
    )
    .await;
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "acme", "tier": "free"}),
    )
    .await;
    let (key, _) = issue(&base, json!({"tenant": "acme"})).await;
    let res = chat_as(&h, &base, Some(&key), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::OK);
    let left = header(&res, "x-sluice-budget-remaining");
    assert!(
        left.starts_with("50%; budget=\"tenant:acme:daily\"; reset="),
        "{left}"
    );
    let res = chat_as(&h, &base, Some(&key), "openai/gpt-4o-mini").await;
    assert!(header(&res, "x-sluice-budget-warning").contains("100% spent"));
    let res = chat_as(&h, &base, Some(&key), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=25 * 3_600).contains(&wait), "{wait}");
    assert!(message(res).await.contains("resets at"));

    // The tier grows: its member has room again at once.
    admin(
        &base,
        "PUT",
        "/v1/tiers/free",
        json!({"budgets": [{"name": "daily", "requests": 5, "period": "day"}]}),
    )
    .await;
    let res = chat_as(&h, &base, Some(&key), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "x-sluice-budget-remaining").starts_with("40%"));

    // A bad budget is refused by its field.
    let res = reqwest::Client::new()
        .put(format!("{base}/v1/tiers/free"))
        .bearer_auth(common::keys::ADMIN)
        .json(&json!({"budgets": [{"name": "d", "requests": 5, "period": "day", "time_zone": "Moon/Base"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["param"], "budgets[0].time_zone", "{body}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_settles_to_what_it_used() {
    let h = Harness::with(slow_sim(), with_admin).await;
    let base = h.url("");
    // Three worst cases (10 + 1,000 tokens) of room.
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "acme", "budgets": [{"name": "t", "tokens": 3_030, "window_seconds": 3600}]}),
    )
    .await;
    let (key, _) = issue(&base, json!({"tenant": "acme"})).await;
    let mut body = chat("openai/gpt-4o-mini");
    body["max_tokens"] = json!(MAX_TOKENS);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let res = send_body(&h, &base, &key, &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    // Reserved with its worst case: a third of the budget.
    assert!(header(&res, "x-sluice-budget-remaining").starts_with("66%"));
    let streamed = res.text().await.unwrap();
    assert!(streamed.contains("\"usage\""), "{streamed}");
    // Once the stream ended it counts what it used (a few dozen tokens),
    // not its worst case: the next call finds about two thirds left, not
    // one.
    let res = send(&h, &base, &key).await;
    let left = header(&res, "x-sluice-budget-remaining");
    let pct: u32 = left.split('%').next().unwrap().parse().unwrap();
    assert!((60..66).contains(&pct), "{left}");
    h.stop().await;
}

/// Counted in the gateway's memory (no Redis), spend survives a restart:
/// the new process reads it back from the usage ledger on the same data
/// directory, so a spent budget still refuses — a tenant's calendar
/// budget and a key's rolling one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_the_same_data_directory_keeps_the_spend() {
    let mut h = Harness::with(sim_config(), with_admin).await;
    let base = h.url("");
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "acme", "budgets": [{"name": "daily", "requests": 2, "period": "day"}]}),
    )
    .await;
    let (acme, _) = issue(&base, json!({"tenant": "acme"})).await;
    admin(&base, "POST", "/v1/tenants", json!({"name": "globex"})).await;
    let (globex, _) = issue(
        &base,
        json!({"tenant": "globex", "budgets": [{"name": "hourly", "tokens": 5_000, "window_seconds": 3600}]}),
    )
    .await;
    for _ in 0..2 {
        let res = chat_as(&h, &base, Some(&acme), "openai/gpt-4o-mini").await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let mut body = chat("openai/gpt-4o-mini");
    body["max_tokens"] = json!(4_000);
    let res = send_body(&h, &base, &globex, &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    let used = res.json::<Value>().await.unwrap()["usage"]["total_tokens"]
        .as_u64()
        .unwrap();
    let res = chat_as(&h, &base, Some(&acme), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);

    h.restart(with_admin).await;
    let base = h.url("");
    let res = chat_as(&h, &base, Some(&acme), "openai/gpt-4o-mini").await;
    assert_eq!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the restart reset the budget"
    );
    let msg = message(res).await;
    assert!(
        msg.contains("budget \"daily\" of tenant \"acme\"")
            && msg.contains("2 requests spent of 2"),
        "{msg}"
    );
    // The key spent `used` of 5,000 tokens: a worst case of the whole cap
    // (10 + 4,990) no longer fits, one of what is left does.
    body["max_tokens"] = json!(5_000 - PROMPT_ESTIMATE);
    let res = send_body(&h, &base, &globex, &body).await;
    assert_eq!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the restart reset the key's budget"
    );
    let msg = message(res).await;
    assert!(
        msg.contains(&format!("{used} tokens spent of 5000")),
        "{msg}"
    );
    body["max_tokens"] = json!(5_000 - PROMPT_ESTIMATE - used);
    let res = send_body(&h, &base, &globex, &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    h.stop().await;
}

/// Proxied API calls count against request budgets (one request each,
/// with model calls), not against money or token budgets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_api_calls_count_against_request_budgets_only() {
    let h = Harness::with(sim_config(), with_admin).await;
    let base = h.url("");
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "acme", "budgets": [{"name": "daily", "requests": 3, "period": "day"}]}),
    )
    .await;
    let (acme, _) = issue(&base, json!({"tenant": "acme"})).await;
    let proxied = |key: &str| {
        h.http
            .post(format!("{base}/proxy/slack/chat.postMessage"))
            .bearer_auth(key)
            .json(&json!({"channel": "C1", "text": "hi"}))
            .send()
    };
    for _ in 0..2 {
        let res = proxied(&acme).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(header(&res, "x-sluice-budget-remaining").contains("tenant:acme:daily"));
    }
    let res = chat_as(&h, &base, Some(&acme), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::OK, "the third request of three");
    let res = proxied(&acme).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let msg = message(res).await;
    assert!(msg.contains("3 requests spent of 3 requests"), "{msg}");

    // A money and token budget far below one model call's worst case:
    // model calls are refused, API calls go on.
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "globex", "budgets": [{"name": "tiny", "money": "0.000001", "tokens": 1, "period": "day"}]}),
    )
    .await;
    let (globex, _) = issue(&base, json!({"tenant": "globex"})).await;
    let res = chat_as(&h, &base, Some(&globex), "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    for _ in 0..5 {
        let res = proxied(&globex).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    h.stop().await;
}
