//! `/proxy/{api}/…`: to a configured API's base URL only, with the
//! request's method, path, query and body, under the API's limits.

mod common;

use std::sync::Arc;

use common::{Harness, expect_error, header, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::ApiConfig;
use sluice_sim::Limits;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_the_api_with_method_path_and_body() {
    let h = Harness::start().await;
    let res = h
        .send(
            "/proxy/slack/chat.postMessage",
            &json!({"channel": "C1", "text": "hi"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-sluice-attempts"), "1");
    assert!(res.headers().contains_key("x-request-id"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["api"], "slack");
    assert_eq!(body["method"], "POST");
    assert_eq!(body["path"], "/chat.postMessage");
    assert_eq!(body["echo"], json!({"channel": "C1", "text": "hi"}));

    for method in [
        reqwest::Method::GET,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let res = h
            .http
            .request(method.clone(), h.url("/proxy/github/repos/o/r/issues/7"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["method"], method.as_str());
        assert_eq!(body["path"], "/repos/o/r/issues/7");
    }
    let stats = h.sim.stats();
    assert_eq!((stats.api("slack").ok, stats.api("github").ok), (1, 3));
    h.stop().await;
}

/// The sim's APIs echo no query, but its own log endpoint reads one
/// (`?since=N`): proxied to it, the answer changes with the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_string_goes_along() {
    let h = Harness::with(sim_config(), |c| {
        let mut log = c.api("slack").unwrap().clone();
        log.name = "simlog".into();
        log.base_url = log.base_url.replace("/slack", "/_sim");
        log.tool_prefixes.clear();
        c.apis.push(log);
    })
    .await;
    let res = h
        .get("/proxy/slack/users.list?limit=2")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    let page = |since: u64| {
        let h = &h;
        async move {
            let path = format!("/proxy/simlog/log?since={since}");
            let res = h.get(&path).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            res.json::<Value>().await.unwrap()
        }
    };
    let all = page(0).await;
    let entries = all["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{all}");
    assert_eq!(entries[0]["path"], "/slack/users.list");
    let next = all["next"].as_u64().unwrap();
    let later = page(next).await;
    assert_eq!(later["entries"], json!([]), "{later}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_api_is_a_404() {
    let h = Harness::start().await;
    let res = h.get("/proxy/nope/anything").send().await.unwrap();
    let e = expect_error(res, 404, "not_found").await;
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    h.stop().await;
}

/// What comes back for a raw request line: the status code.
async fn raw_status(h: &Harness, target: &str) -> u16 {
    common::raw(h.addr, "GET", target, &[]).await.0
}

/// `..` must never climb out of the API's base URL, however it is spelled.
/// Sent raw: an HTTP client would resolve the dots before sending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_are_refused() {
    let h = Harness::start().await;
    for target in [
        "/proxy/slack/../github/x",
        "/proxy/slack/a/../../b",
        "/proxy/slack/a/%2e%2e/b",
        "/proxy/slack/a%2F..%2Fb",
        "/proxy/slack/./x",
    ] {
        assert_eq!(raw_status(&h, target).await, 400, "{target}");
    }
    let stats = h.sim.stats();
    assert_eq!(
        stats.api("slack").requests + stats.api("github").requests,
        0
    );
    h.stop().await;
}

/// Fifteen calls at once against an API that allows a burst of 7 at 20 a
/// second: the gateway, limited to a burst of 5 at the same rate, makes
/// the surplus wait instead of letting the API refuse it. The sim's burst
/// is two above the gateway's to absorb delivery jitter: a call admitted
/// earlier may reach the sim after one admitted later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_above_the_apis_limit_waits_instead_of_getting_429s() {
    let mut sim = sim_config();
    sim.apis.get_mut("slack").unwrap().limits = Limits::per_second(20.0).burst(7);
    let h = Arc::new(
        Harness::with(sim, |c| {
            let slack: &mut ApiConfig = c.apis.iter_mut().find(|a| a.name == "slack").unwrap();
            slack.requests_per_second = 20.0;
            slack.burst = 5;
        })
        .await,
    );
    let tasks: Vec<_> = (0..15)
        .map(|i| {
            let h = Arc::clone(&h);
            tokio::spawn(async move {
                // POST: not retried, so a 429 would reach the client.
                let res = h
                    .send("/proxy/slack/chat.postMessage", &json!({"n": i}))
                    .await;
                res.status()
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let seen = h.sim.stats().api("slack");
    assert_eq!(seen.rate_limited, 0, "the sim refused some");
    assert_eq!(seen.ok, 15);
    Arc::try_unwrap(h).unwrap().stop().await;
}
