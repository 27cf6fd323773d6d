//! The response cache through the gateway: hits, misses and bypasses and
//! their headers, tenants kept apart, sessions, streams replayed, identical
//! misses coalesced, the admin API, metrics, and a cache in Redis shared by
//! two gateways.

mod common;

use common::{ACME, GLOBEX, Harness, header, sim_config, sim_model, two_tenants, wait_until};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_sim::{Latency, SimConfig};

/// A deterministic chat request (temperature 0): cached by default.
fn question(model: &str, content: &str) -> Value {
    json!({
        "model": model,
        "temperature": 0,
        "messages": [{"role": "user", "content": content}],
    })
}

fn sim_with(model: &str, base_ms: u64) -> SimConfig {
    let mut sim = sim_config();
    let latency = Latency {
        base_ms,
        ..Latency::default()
    };
    sim.models
        .insert(model.into(), sim_model(latency, Some(12)));
    sim
}

fn calls(h: &Harness, model: &str) -> u64 {
    h.sim.stats().model(model).requests
}

fn cache_header(res: &reqwest::Response) -> String {
    header(res, "x-sluice-cache")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_question_is_answered_from_the_cache() {
    let h = Harness::with(sim_with("c1", 0), |_| {}).await;
    let first = h
        .send("/v1/chat/completions", &question("openai/c1", "2+2?"))
        .await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(cache_header(&first), "miss");
    let first_body: Value = first.json().await.unwrap();

    // The same request, keys in another order, a `user` and `0.0`.
    let again = json!({"messages": [{"content": "2+2?", "role": "user"}],
                       "temperature": 0.0, "model": "openai/c1", "user": "bob"});
    let second = h.send("/v1/chat/completions", &again).await;
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(cache_header(&second), "hit");
    assert!(header(&second, "age").parse::<u64>().is_ok());
    assert_eq!(header(&second, "x-sluice-attempts"), "0");
    assert!(header(&second, "content-type").starts_with("application/json"));
    let second_body: Value = second.json().await.unwrap();
    assert_eq!(first_body, second_body);
    assert_eq!(calls(&h, "c1"), 1, "one upstream call for two answers");

    // Any parameter that can change the answer misses.
    let mut longer = question("openai/c1", "2+2?");
    longer["max_tokens"] = json!(5);
    let third = h.send("/v1/chat/completions", &longer).await;
    assert_eq!(cache_header(&third), "miss");
    assert_eq!(calls(&h, "c1"), 2);

    // Sampling requests are not looked up.
    let mut sampled = question("openai/c1", "2+2?");
    sampled["temperature"] = json!(0.7);
    for _ in 0..2 {
        let res = h.send("/v1/chat/completions", &sampled).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(cache_header(&res), "bypass");
    }
    assert_eq!(calls(&h, "c1"), 4);

    let metrics = h.metrics().await;
    for line in [
        "sluice_cache_lookups_total{result=\"hit\",model=\"openai/c1\"} 1",
        "sluice_cache_lookups_total{result=\"miss\",model=\"openai/c1\"} 2",
        "sluice_cache_lookups_total{result=\"bypass\",model=\"openai/c1\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        metrics.contains(
            "sluice_cache_saved_tokens_total{model=\"openai/c1\",kind=\"completion\"} 12"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("\nsluice_cache_entries 2"), "{metrics}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_spends_no_limiter_token() {
    let h = Harness::with(sim_with("c2", 0), |c| {
        let mut limits = common::model_limits("openai/c2");
        limits.requests_per_second = 0.001;
        limits.burst = 1;
        c.models.push(limits);
    })
    .await;
    let q = question("openai/c2", "once");
    let first = h.send("/v1/chat/completions", &q).await;
    assert_eq!(first.status(), StatusCode::OK);
    // The one token is spent: another question would wait ~17 min.
    for _ in 0..5 {
        let hit = h.send("/v1/chat/completions", &q).await;
        assert_eq!(hit.status(), StatusCode::OK);
        assert_eq!(cache_header(&hit), "hit");
    }
    let other = h
        .post("/v1/chat/completions", &question("openai/c2", "another"))
        .header("x-sluice-timeout-ms", "200")
        .send()
        .await
        .unwrap();
    assert_ne!(other.status(), StatusCode::OK, "the limiter still holds");
    assert_eq!(calls(&h, "c2"), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_b_never_sees_tenant_a_answer() {
    let h = Harness::with(sim_with("c3", 0), two_tenants).await;
    let ask = |key: &'static str| {
        h.post(
            "/v1/chat/completions",
            &question("openai/c3", "secret plan"),
        )
        .bearer_auth(key)
        .send()
    };
    let a = ask(ACME).await.unwrap();
    assert_eq!(cache_header(&a), "miss");
    let b = ask(GLOBEX).await.unwrap();
    assert_eq!(cache_header(&b), "miss", "globex has its own entries");
    let a2 = ask(ACME).await.unwrap();
    assert_eq!(cache_header(&a2), "hit");
    assert_eq!(calls(&h, "c3"), 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_steers_with_headers_and_bad_ones_are_named() {
    let h = Harness::with(sim_with("c4", 0), |_| {}).await;
    let q = question("openai/c4", "steer");
    let with = |name: &'static str, value: &'static str| {
        h.post("/v1/chat/completions", &q)
            .header(name, value)
            .send()
    };
    let only = with("x-sluice-cache", "only-if-cached").await.unwrap();
    assert_eq!(only.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(calls(&h, "c4"), 0, "only-if-cached never goes upstream");

    let off = with("x-sluice-cache", "off").await.unwrap();
    assert_eq!(cache_header(&off), "bypass");
    let miss = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&miss), "miss", "off stored nothing");
    let refresh = with("x-sluice-cache", "refresh").await.unwrap();
    assert_eq!(cache_header(&refresh), "miss");
    assert_eq!(calls(&h, "c4"), 3);
    let only = with("x-sluice-cache", "only-if-cached").await.unwrap();
    assert_eq!(cache_header(&only), "hit");
    assert_eq!(calls(&h, "c4"), 3);

    for (name, value, says) in [
        (
            "x-sluice-cache",
            "sometimes",
            "off, refresh or only-if-cached",
        ),
        ("x-sluice-cache-ttl", "soon", "whole number of seconds"),
        ("x-sluice-cache-ttl", "0", "at least 1"),
        ("x-sluice-cache-ttl", "999999999", "at most 86400"),
        ("x-sluice-session", "has space", "visible ASCII"),
    ] {
        let res = with(name, value).await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{name}: {value}");
        let body: Value = res.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(name), "{body}");
        assert!(message.contains(says), "{body}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_ttl_expires() {
    let h = Harness::with(sim_with("c5", 0), |_| {}).await;
    let q = question("openai/c5", "brief");
    let send = || {
        h.post("/v1/chat/completions", &q)
            .header("x-sluice-cache-ttl", "1")
            .send()
    };
    assert_eq!(cache_header(&send().await.unwrap()), "miss");
    assert_eq!(cache_header(&send().await.unwrap()), "hit");
    // Past its one second it is gone (whatever the machine's speed).
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    assert_eq!(cache_header(&send().await.unwrap()), "miss");
    assert_eq!(calls(&h, "c5"), 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_own_answers_even_sampled() {
    let h = Harness::with(sim_with("c6", 0), |_| {}).await;
    let q = json!({"model": "openai/c6", "messages": [{"role": "user", "content": "hi"}]});
    let ask = |session: &'static str| {
        h.post("/v1/chat/completions", &q)
            .header("x-sluice-session", session)
            .send()
    };
    assert_eq!(cache_header(&ask("s-1").await.unwrap()), "miss");
    assert_eq!(cache_header(&ask("s-1").await.unwrap()), "hit");
    assert_eq!(cache_header(&ask("s-2").await.unwrap()), "miss");
    let no_session = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&no_session), "bypass");
    assert_eq!(calls(&h, "c6"), 3);
    h.stop().await;
}

/// The SSE `data:` payloads of a body, `[DONE]` included.
fn events(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_owned())
        .collect()
}

/// The text a chat completion stream carries.
fn streamed_text(body: &str) -> String {
    events(body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_stored_when_it_ends_and_replayed_as_sse() {
    let h = Harness::with(sim_with("c7", 0), |_| {}).await;
    let mut q = question("openai/c7", "tell me");
    q["stream"] = json!(true);
    let first = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&first), "miss");
    let live = first.text().await.unwrap();
    // Stored once the stream ended: the next one is a replay.
    let second = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&second), "hit");
    assert!(header(&second, "content-type").starts_with("text/event-stream"));
    let replay = second.text().await.unwrap();
    assert_eq!(events(&replay).last().map(String::as_str), Some("[DONE]"));
    assert!(!streamed_text(&live).is_empty());
    assert_eq!(streamed_text(&replay), streamed_text(&live));

    // The same question without `stream` is the same entry, whole.
    q["stream"] = json!(false);
    let whole = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&whole), "hit");
    let whole: Value = whole.json().await.unwrap();
    assert_eq!(
        whole["choices"][0]["message"]["content"].as_str(),
        Some(streamed_text(&live).as_str())
    );
    // Usage in a last chunk when asked.
    q["stream"] = json!(true);
    q["stream_options"] = json!({"include_usage": true});
    let with_usage = h
        .send("/v1/chat/completions", &q)
        .await
        .text()
        .await
        .unwrap();
    let usage: Vec<Value> = events(&with_usage)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["usage"].is_object())
        .collect();
    assert_eq!(usage.len(), 1, "{with_usage}");
    assert_eq!(usage[0]["usage"]["completion_tokens"], 12);
    assert_eq!(calls(&h, "c7"), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_short_is_not_stored() {
    // 12 tokens 50 ms apart: the stream lasts well past its first chunk.
    let mut sim = sim_config();
    let slow = Latency {
        per_token_ms: 50,
        ..Latency::default()
    };
    sim.models.insert("c8".into(), sim_model(slow, Some(12)));
    let h = Harness::with(sim, |_| {}).await;
    let mut q = question("openai/c8", "cut");
    q["stream"] = json!(true);
    let res = h.send("/v1/chat/completions", &q).await;
    let mut body = res.bytes_stream();
    // Read one chunk, then leave.
    let _ = body.next().await;
    drop(body);
    wait_until("the sim answered the first", || async {
        calls(&h, "c8") == 1
    })
    .await;
    let again = h.send("/v1/chat/completions", &q).await;
    let text = again.text().await.unwrap();
    assert!(text.contains("[DONE]"));
    assert_eq!(calls(&h, "c8"), 2, "the half stream was not stored");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_identical_streams_make_one_upstream_call() {
    // Joiners wait in the flight, not in the admission queue: the
    // queue's depth of 50 per tenant does not apply to them.
    let h = Harness::with(sim_with("c9", 300), |_| {}).await;
    let mut q = question("openai/c9", "everyone asks this");
    q["stream"] = json!(true);
    let requests = (0..100).map(|_| async {
        let res = h.send("/v1/chat/completions", &q).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(header(&res, "content-type").starts_with("text/event-stream"));
        res.text().await.unwrap()
    });
    let bodies = futures_util::future::join_all(requests).await;
    let text = streamed_text(&bodies[0]);
    assert!(!text.is_empty());
    for body in &bodies {
        assert_eq!(
            events(body).last().map(String::as_str),
            Some("[DONE]"),
            "{body}"
        );
        assert_eq!(streamed_text(body), text);
    }
    assert_eq!(
        calls(&h, "c9"),
        1,
        "one upstream call for a hundred streams"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_empties_the_cache_and_tenants_see_their_own_stats() {
    let h = Harness::with(sim_with("c10", 0), |c| {
        two_tenants(c);
        c.admin_token = Some("root-token".into());
    })
    .await;
    let ask = |key: &'static str, content: &'static str| {
        h.post("/v1/chat/completions", &question("openai/c10", content))
            .bearer_auth(key)
            .send()
    };
    for (key, content) in [(ACME, "a"), (ACME, "a"), (ACME, "b"), (GLOBEX, "a")] {
        assert_eq!(ask(key, content).await.unwrap().status(), StatusCode::OK);
    }
    let hr = &h;
    let stats = |key: &'static str| async move {
        let path = if key == "root-token" {
            "/v1/cache/stats"
        } else {
            "/v1/cache/stats/tenant"
        };
        hr.get(path)
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let acme = stats(ACME).await;
    assert_eq!(acme["scope"], "tenant", "{acme}");
    assert_eq!(acme["stats"]["hits"], 1, "{acme}");
    assert_eq!(acme["stats"]["misses"], 2, "{acme}");
    let globex = stats(GLOBEX).await;
    assert_eq!(globex["stats"]["hits"], 0, "{globex}");
    assert_eq!(globex["stats"]["misses"], 1, "{globex}");
    let all = stats("root-token").await;
    assert_eq!(all["scope"], "all");
    assert_eq!(all["stats"]["entries"], 3, "{all}");
    assert_eq!(all["stats"]["hits"], 1);

    let delete = |query: &'static str, key: &'static str| {
        h.http
            .delete(h.url(&format!("/v1/cache{query}")))
            .bearer_auth(key)
            .send()
    };
    let refused = delete("", ACME).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN, "tenants may not");
    let bad = delete("?key_prefix=xyz", "root-token").await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("key_prefix"));
    let bad = delete("?tenat=acme", "root-token").await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("tenat"));

    let removed: Value = delete("?tenant=acme", "root-token")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(removed["removed"], 2, "{removed}");
    assert_eq!(cache_header(&ask(ACME, "a").await.unwrap()), "miss");
    assert_eq!(cache_header(&ask(GLOBEX, "a").await.unwrap()), "hit");
    let removed: Value = delete("?model=openai/c10", "root-token")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(removed["removed"], 2, "{removed}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_a_cache_in_redis() {
    let url = match std::env::var("SLUICE_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping");
            return;
        }
    };
    let prefix = format!("cache-{}-{}:", std::process::id(), fastrand_suffix());
    let shared = |c: &mut sluice_gateway::config::Config| {
        let mut redis = sluice_gateway::config::RedisSettings::new(url.clone());
        redis.prefix = prefix.clone();
        c.redis = Some(redis);
        c.cache.redis = true;
    };
    let h = Harness::with(sim_with("c11", 0), shared).await;
    let other = h.replica(shared).await;
    let q = question("openai/c11", "shared?");
    let first = h.send("/v1/chat/completions", &q).await;
    assert_eq!(cache_header(&first), "miss");
    let first: Value = first.json().await.unwrap();
    let second = h
        .http
        .post(other.url("/v1/chat/completions"))
        .json(&q)
        .send()
        .await
        .unwrap();
    assert_eq!(cache_header(&second), "hit", "the other replica's answer");
    let second: Value = second.json().await.unwrap();
    assert_eq!(first, second);
    assert_eq!(calls(&h, "c11"), 1);
    h.stop().await;
}

fn fastrand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_translated_answer_is_cached_in_the_clients_format() {
    let h = Harness::with(sim_with("c12", 0), |_| {}).await;
    for model in ["anthropic/c12"] {
        let mut q = question(model, "translated");
        q["stream"] = json!(true);
        let first = h.send("/v1/chat/completions", &q).await;
        assert_eq!(first.status(), StatusCode::OK, "{model}");
        assert_eq!(cache_header(&first), "miss");
        let live = first.text().await.unwrap();
        assert_eq!(
            usage_chunks(&live),
            0,
            "{model}: usage only when asked: {live}"
        );
        q["stream_options"] = json!({"include_usage": true});
        let hit = h.send("/v1/chat/completions", &q).await;
        assert_eq!(cache_header(&hit), "hit", "{model}");
        let replay = hit.text().await.unwrap();
        assert_eq!(streamed_text(&replay), streamed_text(&live), "{model}");
        assert_eq!(usage_chunks(&replay), 1, "{model}: {replay}");
    }
    h.stop().await;
}

/// Chunks of a chat stream that carry a usage object.
fn usage_chunks(body: &str) -> usize {
    events(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["usage"].is_object())
        .count()
}

/// `[cache.apis]`: proxied GETs of a cached API are answered from the
/// cache per tenant and per varying header; writes, conditional reads,
/// uncached APIs and answers the upstream forbids storing are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_gets_of_a_cached_api_are_answered_from_the_cache() {
    let mut sim = sim_config();
    sim.apis.get_mut("github").unwrap().cache_control = Some("private, max-age=60".into());
    sim.apis.get_mut("gmail").unwrap().cache_control = Some("no-store".into());
    let h = Harness::with(sim, |c| {
        two_tenants(c);
        c.admin_token = Some("root-token".into());
        for api in ["github", "gmail"] {
            c.cache
                .apis
                .insert(api.into(), sluice_gateway::config::ApiCache::default());
        }
    })
    .await;
    let get = |key: &'static str, path: &str, extra: &[(&'static str, &'static str)]| {
        let mut req = h.get(path).bearer_auth(key);
        for (n, v) in extra {
            req = req.header(*n, *v);
        }
        req.send()
    };
    let ok = |api: &str| h.sim.stats().api(api).ok;
    let issues = "/proxy/github/repos/o/r/issues?state=open";

    let first = get(ACME, issues, &[]).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(cache_header(&first), "miss");
    assert_eq!(header(&first, "cache-control"), "private, max-age=60");
    let first_body: Value = first.json().await.unwrap();
    let again = get(ACME, issues, &[]).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(cache_header(&again), "hit");
    assert!(header(&again, "age").parse::<u64>().is_ok());
    assert!(header(&again, "content-type").starts_with("application/json"));
    assert_eq!(again.json::<Value>().await.unwrap(), first_body);
    assert_eq!(ok("github"), 1, "one upstream call for two answers");

    // Another query, another accept header, another tenant: misses.
    let other = get(ACME, "/proxy/github/repos/o/r/issues?state=closed", &[])
        .await
        .unwrap();
    assert_eq!(cache_header(&other), "miss");
    let raw = get(
        ACME,
        issues,
        &[("accept", "application/vnd.github.raw+json")],
    )
    .await
    .unwrap();
    assert_eq!(cache_header(&raw), "miss");
    let globex = get(GLOBEX, issues, &[]).await.unwrap();
    assert_eq!(cache_header(&globex), "miss", "globex has its own entries");
    assert_eq!(ok("github"), 4);

    // Writes and conditional reads go upstream, said so.
    let write = h
        .post(issues, &json!({"title": "t"}))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(cache_header(&write), "bypass");
    let conditional = get(ACME, issues, &[("if-none-match", "\"abc\"")])
        .await
        .unwrap();
    assert_eq!(cache_header(&conditional), "bypass");
    let off = get(ACME, issues, &[("x-sluice-cache", "off")])
        .await
        .unwrap();
    assert_eq!(cache_header(&off), "bypass");
    assert_eq!(ok("github"), 7);
    // `refresh` goes upstream and stores; `only-if-cached` never does.
    let refreshed = get(ACME, issues, &[("x-sluice-cache", "refresh")])
        .await
        .unwrap();
    assert_eq!(cache_header(&refreshed), "miss");
    assert_eq!(ok("github"), 8);
    let cached_only = get(ACME, issues, &[("x-sluice-cache", "only-if-cached")])
        .await
        .unwrap();
    assert_eq!(cache_header(&cached_only), "hit");
    let nothing = get(
        ACME,
        "/proxy/github/never",
        &[("x-sluice-cache", "only-if-cached")],
    )
    .await
    .unwrap();
    assert_eq!(nothing.status(), StatusCode::GATEWAY_TIMEOUT);
    let bad = get(ACME, issues, &[("x-sluice-cache", "maybe")])
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("x-sluice-cache"));
    assert_eq!(ok("github"), 8);

    // The upstream said no-store: never stored.
    for _ in 0..2 {
        let res = get(ACME, "/proxy/gmail/messages", &[]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(cache_header(&res), "miss");
        res.bytes().await.unwrap();
    }
    assert_eq!(ok("gmail"), 2);
    // An API not under [cache.apis] is not looked up at all.
    let slack = get(ACME, "/proxy/slack/users.list", &[]).await.unwrap();
    assert_eq!(slack.status(), StatusCode::OK);
    assert!(slack.headers().get("x-sluice-cache").is_none());
    let slack = get(
        ACME,
        "/proxy/slack/users.list",
        &[("x-sluice-cache", "only-if-cached")],
    )
    .await
    .unwrap();
    assert_eq!(slack.status(), StatusCode::GATEWAY_TIMEOUT);

    // The admin empties one API's entries.
    let removed: Value = h
        .http
        .delete(h.url("/v1/cache?api=github&tenant=acme"))
        .bearer_auth("root-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(removed["removed"], 3, "{removed}");
    assert_eq!(cache_header(&get(ACME, issues, &[]).await.unwrap()), "miss");
    assert_eq!(
        cache_header(&get(GLOBEX, issues, &[]).await.unwrap()),
        "hit"
    );
    h.stop().await;
}
