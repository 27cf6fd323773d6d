//! Keys issued through the key store at work: they authenticate, their
//! limits and allow-lists hold (a refusal names the limit and says when
//! to come back), rotation keeps the old key for its grace, revocation and
//! blocks take effect at once, a tier change reaches its members, static
//! keys keep working, the limiter API cannot touch per-key limits, and a
//! key revoked at one gateway is refused by another sharing Redis.

mod common;

use std::time::{Duration, Instant};

use common::keys::{
    MODEL, admin, chat_as, fresh_schema, issue, message, redis_url, shared, with_admin,
};
use common::{Harness, header, sim_config};
use reqwest::StatusCode;
use serde_json::json;
use sluice_gateway::config::TenantConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_keys_authenticate_and_their_limits_hold() {
    let h = Harness::with(sim_config(), with_admin).await;
    let base = h.url("");
    // Open until the store has a tenant.
    assert_eq!(
        chat_as(&h, &base, None, MODEL).await.status(),
        StatusCode::OK
    );
    admin(&base, "POST", "/v1/tenants", json!({"name": "acme"})).await;
    let res = chat_as(&h, &base, None, MODEL).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    let (key, id) = issue(
        &base,
        json!({"tenant": "acme", "limits": {"requests_per_minute": 2, "models": ["openai/gpt-4o-mini*"]}}),
    )
    .await;
    for _ in 0..2 {
        assert_eq!(
            chat_as(&h, &base, Some(&key), MODEL).await.status(),
            StatusCode::OK
        );
    }
    // The third within the minute: refused, naming the key's limit.
    let res = chat_as(&h, &base, Some(&key), MODEL).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let m = message(res).await;
    assert!(m.contains(&format!("caller:key:{id}:rpm")), "{m}");

    // Not on its allow-list: refused before any limit is spent.
    let res = chat_as(&h, &base, Some(&key), "openai/gpt-4o").await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(message(res).await.contains("allow-list"));

    // Unknown and forged keys.
    let forged = format!("{}0", &key[..key.len() - 1]);
    let forged = if forged == key {
        format!("{}1", &key[..key.len() - 1])
    } else {
        forged
    };
    for bad in [forged.as_str(), "sk-sluice-nope"] {
        let res = chat_as(&h, &base, Some(bad), MODEL).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{bad}");
    }

    // Rotation: both keys work during the grace, each with its own limits.
    let (key2, _) = issue(&base, json!({"tenant": "acme"})).await;
    let id2 = &key2["sk-sluice-".len()..key2.find('_').unwrap()];
    let rotated = admin(
        &base,
        "POST",
        &format!("/v1/keys/{id2}/rotate"),
        json!({"grace_seconds": 600}),
    )
    .await;
    let key3 = rotated["key"].as_str().unwrap().to_owned();
    assert_eq!(
        chat_as(&h, &base, Some(&key2), MODEL).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        chat_as(&h, &base, Some(&key3), MODEL).await.status(),
        StatusCode::OK
    );

    // Revoked: refused at once (the cache was told).
    admin(&base, "POST", &format!("/v1/keys/{id2}/revoke"), json!({})).await;
    let res = chat_as(&h, &base, Some(&key2), MODEL).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(message(res).await.contains("revoked"));

    // A blocked tenant: every key refused, until unblocked.
    admin(&base, "POST", "/v1/tenants/acme/block", json!({})).await;
    let res = chat_as(&h, &base, Some(&key3), MODEL).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    admin(&base, "POST", "/v1/tenants/acme/unblock", json!({})).await;
    assert_eq!(
        chat_as(&h, &base, Some(&key3), MODEL).await.status(),
        StatusCode::OK
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_change_reaches_its_members_and_static_keys_still_work() {
    let h = Harness::with(sim_config(), |c| {
        with_admin(c);
        c.tenants.push(TenantConfig::new("static", "static-key"));
    })
    .await;
    let base = h.url("");
    admin(
        &base,
        "POST",
        "/v1/tiers",
        json!({"name": "basic", "limits": {"models": ["openai/gpt-4o-mini"], "max_concurrent": 4}}),
    )
    .await;
    admin(
        &base,
        "POST",
        "/v1/tenants",
        json!({"name": "acme", "tier": "basic"}),
    )
    .await;
    let (key, _) = issue(&base, json!({"tenant": "acme"})).await;
    assert_eq!(
        chat_as(&h, &base, Some(&key), MODEL).await.status(),
        StatusCode::OK
    );
    let other = "openai/gpt-4o";
    assert_eq!(
        chat_as(&h, &base, Some(&key), other).await.status(),
        StatusCode::FORBIDDEN
    );
    admin(
        &base,
        "PUT",
        "/v1/tiers/basic",
        json!({"limits": {"models": ["openai/gpt-4o"]}}),
    )
    .await;
    assert_eq!(
        chat_as(&h, &base, Some(&key), other).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        chat_as(&h, &base, Some(&key), MODEL).await.status(),
        StatusCode::FORBIDDEN
    );
    // The config's key: unchanged.
    assert_eq!(
        chat_as(&h, &base, Some("static-key"), MODEL).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        chat_as(&h, &base, Some("other-key"), MODEL).await.status(),
        StatusCode::UNAUTHORIZED
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_api_cannot_touch_per_key_limits() {
    let h = Harness::with(sim_config(), with_admin).await;
    let base = h.url("");
    admin(&base, "POST", "/v1/tenants", json!({"name": "acme"})).await;
    admin(&base, "POST", "/v1/tenants", json!({"name": "globex"})).await;
    let (acme, acme_id) = issue(
        &base,
        json!({"tenant": "acme", "limits": {"requests_per_minute": 100}}),
    )
    .await;
    let (globex, _) = issue(&base, json!({"tenant": "globex"})).await;
    assert_eq!(
        chat_as(&h, &base, Some(&acme), MODEL).await.status(),
        StatusCode::OK
    );
    // Globex neither takes nor sees acme's key limit.
    let res = h
        .http
        .post(h.url("/v1/limits/acquire"))
        .bearer_auth(&globex)
        .json(&json!({"resource": format!("caller:key:{acme_id}:rpm")}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let res = h
        .http
        .get(h.url("/v1/limits"))
        .bearer_auth(&globex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let listed = res.text().await.unwrap();
    assert!(!listed.contains("caller:"), "{listed}");
    // Nor does an anonymous caller get anywhere now that there are tenants.
    let res = h.http.get(h.url("/v1/limits")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_at_one_gateway_is_refused_by_the_other() {
    let Some(redis) = redis_url() else {
        eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping");
        return;
    };
    let schema = fresh_schema().await;
    let store = schema.url.clone();
    let prefix = format!("kgw{:x}:", fastrand::u64(..));
    let a = Harness::with(sim_config(), shared(&redis, &prefix, "a", &store)).await;
    let b = a.replica(shared(&redis, &prefix, "b", &store)).await;
    let (a_url, b_url) = (a.url(""), format!("http://{}", b.addr));
    admin(&a_url, "POST", "/v1/tenants", json!({"name": "acme"})).await;
    let (key, id) = issue(&a_url, json!({"tenant": "acme"})).await;
    // B learns of the tenant on the bus and of the key from the store; the
    // key is in its cache (60 s) from now on.
    for base in [&a_url, &b_url] {
        assert_eq!(
            chat_as(&a, base, Some(&key), MODEL).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        chat_as(&a, &b_url, None, MODEL).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let t0 = Instant::now();
    admin(&a_url, "POST", &format!("/v1/keys/{id}/revoke"), json!({})).await;
    // Only the bus can tell B before its cache's 60 s are up.
    let mut refused = None;
    while t0.elapsed() < Duration::from_secs(10) {
        if chat_as(&a, &b_url, Some(&key), MODEL).await.status() == StatusCode::UNAUTHORIZED {
            refused = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let refused = refused.expect("the other gateway refuses the revoked key");
    println!(
        "revoked at A, refused at B {:.1} ms later",
        refused.as_secs_f64() * 1e3
    );
    drop(b);
    a.stop().await;
}
