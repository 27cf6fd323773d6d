//! The Redis-backed response cache against a real `redis-server`
//! (`SLUICE_TEST_REDIS_URL`), with two clients standing for two gateway
//! replicas.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use sluice_usage::cache::{
    Answer, AnswerCache, CacheConfig, CacheKey, Invalidate, NewEntry, RedisCache, RedisCacheConfig,
    Scope, SessionId,
};
use sluice_usage::{Endpoint, Usage};

fn redis_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
            None
        }
    }
}

/// A key prefix of this test's own, so tests running at once never meet.
fn prefix(test: &str) -> String {
    format!("t{}-{test}:", std::process::id())
}

fn client(url: &str, prefix: &str, config: CacheConfig) -> RedisCache {
    let mut redis = RedisCacheConfig::new(url);
    redis.prefix = prefix.to_owned();
    redis.timeout = Duration::from_secs(2);
    RedisCache::new(config, redis).expect("a valid url")
}

/// Two replicas sharing one Redis under `prefix`.
fn pair(url: &str, test: &str, config: CacheConfig) -> (RedisCache, RedisCache) {
    let p = prefix(test);
    (client(url, &p, config.clone()), client(url, &p, config))
}

fn tenant(name: &str) -> Scope {
    Scope::Tenant(name.to_owned())
}

fn key(scope: &Scope, question: &str) -> CacheKey {
    let body = json!({"model": "gpt-4o-mini", "temperature": 0,
                      "messages": [{"role": "user", "content": question}]});
    CacheKey::for_request(scope, "openai", Endpoint::Chat, &body)
}

fn usage() -> Usage {
    Usage {
        prompt_tokens: 100,
        completion_tokens: 20,
        total_tokens: 120,
    }
}

async fn store(cache: &RedisCache, scope: &Scope, model: &str, question: &str, body: &str) {
    let entry = AnswerCache::entry(
        cache,
        NewEntry {
            scope: scope.clone(),
            model: model.to_owned(),
            answer: Answer::json(body.to_owned()),
            usage: Some(usage()),
            ttl: None,
        },
    )
    .expect("storable");
    cache.put(key(scope, question), entry).await;
}

async fn redis_conn(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis is up")
}

#[tokio::test]
async fn an_answer_stored_by_one_replica_is_a_hit_on_the_other() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "shared", CacheConfig::default());
    let acme = tenant("acme");
    let k = key(&acme, "what is 2+2?");
    assert!(b.get(&k, true, None).await.is_none(), "empty at first");

    let body = r#"{"choices":[{"message":{"role":"assistant","content":"4"}}]}"#;
    store(&a, &acme, "gpt-4o-mini", "what is 2+2?", body).await;

    let hit = b
        .get(&k, true, None)
        .await
        .expect("a hit on the other replica");
    assert_eq!(hit.entry.answer().body, Bytes::from(body));
    assert_eq!(hit.entry.answer().status, 200);
    assert_eq!(
        hit.entry.answer().headers,
        vec![("content-type".to_owned(), "application/json".to_owned())]
    );
    assert_eq!(hit.entry.model(), "gpt-4o-mini");
    assert_eq!(hit.entry.scope(), &acme);
    assert_eq!(hit.entry.usage(), Some(usage()));
    assert_eq!(hit.entry.ttl(), CacheConfig::default().ttl);
    assert!(!hit.from_session);
    assert!(hit.age < CacheConfig::default().ttl);

    let peeked = a.peek(&k).await.expect("a second look finds it");
    assert_eq!(peeked.entry.answer().body, Bytes::from(body));
    assert!(a.peek(&key(&acme, "another")).await.is_none());
    let stats = b.stats().await;
    assert_eq!((stats.hits, stats.misses), (1, 1), "peeks count nothing");
    assert_eq!(stats.models["gpt-4o-mini"].saved_prompt_tokens, 100);
    assert_eq!(stats.entries, 1, "what Redis holds, seen from either");
    assert_eq!(a.stats().await.stores, 1);
    assert_eq!(stats.store_errors, 0);
}

#[tokio::test]
async fn tenant_b_never_sees_tenant_a_entry() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "tenants", CacheConfig::default());
    store(&a, &tenant("a"), "m", "q", r#"{"secret":"a"}"#).await;
    assert!(b.get(&key(&tenant("b"), "q"), true, None).await.is_none());
    assert!(b.get(&key(&tenant("a"), "q"), true, None).await.is_some());
}

#[tokio::test]
async fn values_are_compressed_and_keyed_as_documented() {
    let Some(url) = redis_url() else { return };
    let (a, _) = pair(&url, "layout", CacheConfig::default());
    let acme = tenant("acme");
    let content = "the same sentence again. ".repeat(400);
    let body = json!({"choices": [{"message": {"content": content}}]}).to_string();
    store(&a, &acme, "gpt-4o-mini", "long", &body).await;

    let mut c = redis_conn(&url).await;
    let name = format!("{}cache:{}", prefix("layout"), key(&acme, "long"));
    assert_eq!(a.redis_key(&key(&acme, "long")), name);
    let (scope, model, ttl): (String, String, u64) = redis::cmd("HMGET")
        .arg(&name)
        .arg("s")
        .arg("m")
        .arg("l")
        .query_async(&mut c)
        .await
        .expect("the hash");
    assert_eq!(
        (scope.as_str(), model.as_str(), ttl),
        ("tenant:acme", "gpt-4o-mini", 600_000)
    );
    let stored: u64 = redis::cmd("HSTRLEN")
        .arg(&name)
        .arg("v")
        .query_async(&mut c)
        .await
        .expect("hstrlen");
    assert!(
        stored * 4 < body.len() as u64,
        "{stored} bytes stored for a body of {}",
        body.len()
    );
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&name)
        .query_async(&mut c)
        .await
        .expect("pttl");
    assert!(pttl > 0 && pttl <= 600_000, "expires with its ttl: {pttl}");
    assert_eq!(a.stats().await.bytes, stored);
}

#[tokio::test]
async fn redis_expires_an_entry_after_its_ttl() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "ttl", CacheConfig::default());
    let acme = tenant("acme");
    let entry = AnswerCache::entry(
        &a,
        NewEntry {
            scope: acme.clone(),
            model: "m".into(),
            answer: Answer::json("{}"),
            usage: None,
            ttl: Some(Duration::from_millis(300)),
        },
    )
    .expect("storable");
    let k = key(&acme, "short");
    a.put(k, entry).await;
    let mut c = redis_conn(&url).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(a.redis_key(&k))
        .query_async(&mut c)
        .await
        .expect("pttl");
    assert!(pttl > 0 && pttl <= 300, "the entry's own ttl: {pttl}");
    // Redis's clock is real: wait until it has passed the TTL (the test
    // fails only if the entry outlives ten seconds).
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if b.get(&k, true, None).await.is_none() {
            gone = true;
            break;
        }
    }
    assert!(gone, "expired");
}

#[tokio::test]
async fn an_idle_limit_sets_the_expiry_and_a_hit_renews_it() {
    let Some(url) = redis_url() else { return };
    let config = CacheConfig {
        time_to_idle: Some(Duration::from_secs(30)),
        ..CacheConfig::default()
    };
    let (a, b) = pair(&url, "idle", config);
    let acme = tenant("acme");
    store(&a, &acme, "m", "q", "{}").await;
    let name = a.redis_key(&key(&acme, "q"));
    let mut c = redis_conn(&url).await;
    let pttl = |c: &mut redis::aio::MultiplexedConnection| {
        let name = name.clone();
        let mut c = c.clone();
        async move {
            redis::cmd("PTTL")
                .arg(name)
                .query_async::<i64>(&mut c)
                .await
                .expect("pttl")
        }
    };
    assert!((1..=30_000).contains(&pttl(&mut c).await), "idle, not ttl");
    redis::cmd("PEXPIRE")
        .arg(&name)
        .arg(5_000)
        .query_async::<()>(&mut c)
        .await
        .expect("pexpire");
    assert!(b.get(&key(&acme, "q"), true, None).await.is_some());
    assert!(pttl(&mut c).await > 5_000, "a hit renews the idle limit");
}

#[tokio::test]
async fn invalidation_by_tenant_model_or_prefix_is_seen_by_both() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "invalidate", CacheConfig::default());
    let (x, y) = (tenant("x"), tenant("y"));
    store(&a, &x, "m1", "q1", "{}").await;
    store(&a, &x, "m2", "q2", "{}").await;
    store(&a, &y, "m1", "q3", "{}").await;
    store(&a, &y, "m2", "q4", "{}").await;

    let by_model = Invalidate {
        scope: Some(x.clone()),
        model: Some("m1".into()),
        key_prefix: None,
    };
    assert_eq!(b.invalidate(&by_model).await, 1);
    assert!(a.get(&key(&x, "q1"), true, None).await.is_none());
    assert!(a.get(&key(&x, "q2"), true, None).await.is_some());

    let hex = key(&y, "q3").to_hex();
    let by_prefix = Invalidate {
        key_prefix: Some(hex[..12].to_ascii_uppercase()),
        ..Invalidate::default()
    };
    assert_eq!(b.invalidate(&by_prefix).await, 1);
    assert!(a.get(&key(&y, "q3"), true, None).await.is_none());
    let not_hex = Invalidate {
        key_prefix: Some("*".into()),
        ..Invalidate::default()
    };
    assert_eq!(b.invalidate(&not_hex).await, 0, "a glob is not a prefix");

    let by_tenant = Invalidate {
        scope: Some(y.clone()),
        ..Invalidate::default()
    };
    assert_eq!(b.invalidate(&by_tenant).await, 1);
    assert!(a.get(&key(&y, "q4"), true, None).await.is_none());
    assert!(a.get(&key(&x, "q2"), true, None).await.is_some());
    assert_eq!(b.stats().await.entries, 1);
}

#[tokio::test]
async fn sessions_answer_from_the_replica_that_served_them() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "sessions", CacheConfig::default());
    let acme = tenant("acme");
    let session = SessionId::new(acme.clone(), "s-1").expect("valid");
    let k = key(&acme, "sampled");
    let entry = AnswerCache::entry(
        &a,
        NewEntry {
            scope: acme.clone(),
            model: "m".into(),
            answer: Answer::json("{}"),
            usage: None,
            ttl: None,
        },
    )
    .expect("storable");
    a.remember(&session, k, entry);
    let hit = a.get(&k, false, Some(&session)).await.expect("own session");
    assert!(hit.from_session);
    assert!(b.get(&k, false, Some(&session)).await.is_none());
    assert!(
        a.get(&k, true, None).await.is_none(),
        "not in the shared store"
    );
}

#[tokio::test]
async fn a_damaged_or_foreign_value_is_a_miss_and_is_replaced() {
    let Some(url) = redis_url() else { return };
    let (a, b) = pair(&url, "damaged", CacheConfig::default());
    let acme = tenant("acme");
    store(&a, &acme, "m", "q", r#"{"ok":1}"#).await;
    let name = a.redis_key(&key(&acme, "q"));
    let mut c = redis_conn(&url).await;
    for value in [&b"\xff\xff\xff\x7fjunk"[..], b"", b"\x05\x00\x00\x00abc"] {
        redis::cmd("HSET")
            .arg(&name)
            .arg("v")
            .arg(value)
            .query_async::<()>(&mut c)
            .await
            .expect("hset");
        assert!(b.get(&key(&acme, "q"), true, None).await.is_none());
    }
    store(&a, &acme, "m", "q", r#"{"ok":2}"#).await;
    let hit = b.get(&key(&acme, "q"), true, None).await.expect("replaced");
    assert_eq!(hit.entry.answer().body, Bytes::from_static(br#"{"ok":2}"#));
}

#[tokio::test]
async fn a_redis_that_is_away_makes_misses_not_failures() {
    // Nothing listens on port 1.
    let cache = client("redis://127.0.0.1:1", "away:", CacheConfig::default());
    let acme = tenant("acme");
    assert!(cache.ping().await.is_err());
    store(&cache, &acme, "m", "q", "{}").await;
    assert!(cache.get(&key(&acme, "q"), true, None).await.is_none());
    assert_eq!(cache.invalidate(&Invalidate::default()).await, 0);
    let stats = cache.stats().await;
    assert_eq!(stats.stores, 0);
    assert_eq!(stats.misses, 1);
    assert!(stats.store_errors >= 2, "{stats:?}");
    assert!(RedisCache::new(CacheConfig::default(), RedisCacheConfig::new("nope")).is_err());
}
