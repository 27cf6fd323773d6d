//! The in-memory store: hits, expiry, the byte bound, tenants, sessions,
//! invalidation and stats.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use sluice_limit::ManualClock;

use crate::cache::{
    Answer, CacheConfig, CacheKey, ENTRY_OVERHEAD_BYTES, NewEntry, NotStored, ResponseCache, Scope,
};
use crate::{Endpoint, Usage};

pub(super) fn tenant(name: &str) -> Scope {
    Scope::Tenant(name.to_owned())
}

pub(super) fn key_of(scope: &Scope, question: &str) -> CacheKey {
    let body = json!({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": question}]});
    CacheKey::for_request(scope, "openai", Endpoint::Chat, &body)
}

pub(super) fn new_entry(scope: &Scope, model: &str, body: impl Into<Bytes>) -> NewEntry {
    NewEntry {
        scope: scope.clone(),
        model: model.to_owned(),
        answer: Answer::json(body),
        usage: Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
            total_tokens: 120,
        }),
        ttl: None,
    }
}

pub(super) fn manual(config: CacheConfig) -> (ResponseCache, ManualClock) {
    let clock = ManualClock::new();
    (
        ResponseCache::with_clock(config, Arc::new(clock.clone())),
        clock,
    )
}

pub(super) fn store(cache: &ResponseCache, scope: &Scope, question: &str) -> CacheKey {
    let key = key_of(scope, question);
    let entry = cache.entry(new_entry(scope, "m", "{}")).expect("storable");
    cache.insert(key, entry);
    key
}

#[test]
fn a_stored_answer_is_a_hit_with_its_age() {
    let (cache, clock) = manual(CacheConfig::default());
    let a = tenant("a");
    let key = key_of(&a, "q");
    assert!(cache.lookup(&key, true, None).is_none());
    let entry = cache
        .entry(new_entry(&a, "m", r#"{"ok":true}"#))
        .expect("storable");
    cache.insert(key, entry);
    clock.advance(Duration::from_secs(3));
    let hit = cache.lookup(&key, true, None).expect("a hit");
    assert_eq!(hit.age, Duration::from_secs(3));
    assert!(!hit.from_session);
    assert_eq!(
        hit.entry.answer().body,
        Bytes::from_static(br#"{"ok":true}"#)
    );
    assert_eq!(hit.entry.model(), "m");
    // Not looked up in the store: a miss even though it is there.
    assert!(cache.lookup(&key, false, None).is_none());
    // A peek finds it and counts nothing.
    assert_eq!(cache.peek(&key).expect("there").age, Duration::from_secs(3));
    assert!(cache.peek(&key_of(&a, "other")).is_none());
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 2));
}

#[test]
fn entries_expire_after_their_ttl_by_the_injected_clock() {
    let config = CacheConfig {
        ttl: Duration::from_secs(60),
        max_ttl: Duration::from_secs(120),
        ..CacheConfig::default()
    };
    let (cache, clock) = manual(config);
    let a = tenant("a");
    let key = store(&cache, &a, "q");
    clock.advance(Duration::from_secs(59));
    assert!(
        cache.lookup(&key, true, None).is_some(),
        "pending expiry: still served"
    );
    clock.advance(Duration::from_secs(1));
    assert!(
        cache.lookup(&key, true, None).is_none(),
        "expired at its TTL"
    );
    assert_eq!(cache.stats().expirations, 1);
    assert_eq!(cache.stats().entries, 0, "and removed");

    // A TTL asked for per request, cut to max_ttl.
    let long = key_of(&a, "long");
    let mut new = new_entry(&a, "m", "{}");
    new.ttl = Some(Duration::from_secs(3600));
    let entry = cache.entry(new).expect("storable");
    assert_eq!(entry.ttl(), Duration::from_secs(120));
    cache.insert(long, entry);
    clock.advance(Duration::from_secs(119));
    assert!(cache.lookup(&long, true, None).is_some());
    clock.advance(Duration::from_secs(1));
    assert!(cache.lookup(&long, true, None).is_none());
}

#[test]
fn idle_entries_expire_before_their_ttl() {
    let config = CacheConfig {
        time_to_idle: Some(Duration::from_secs(10)),
        ..CacheConfig::default()
    };
    let (cache, clock) = manual(config);
    let key = store(&cache, &tenant("a"), "q");
    for _ in 0..5 {
        clock.advance(Duration::from_secs(9));
        assert!(
            cache.lookup(&key, true, None).is_some(),
            "each use renews it"
        );
    }
    clock.advance(Duration::from_secs(10));
    assert!(cache.lookup(&key, true, None).is_none());
}

#[tokio::test(start_paused = true)]
async fn ttl_follows_paused_tokio_time() {
    let cache = ResponseCache::new(CacheConfig {
        ttl: Duration::from_secs(30),
        ..CacheConfig::default()
    });
    let key = store(&cache, &tenant("a"), "q");
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(cache.lookup(&key, true, None).is_some());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(cache.lookup(&key, true, None).is_none());
}

#[test]
fn the_store_is_bounded_by_bytes_not_entries() {
    let max_bytes = 100_000;
    let (cache, _clock) = manual(CacheConfig {
        max_bytes,
        ..CacheConfig::default()
    });
    let a = tenant("a");
    let body = Bytes::from(vec![b' '; 10_000]);
    for i in 0..50 {
        let entry = cache
            .entry(new_entry(&a, "m", body.clone()))
            .expect("storable");
        let weight =
            10_000 + "m".len() as u64 + "content-type".len() as u64 + 16 + ENTRY_OVERHEAD_BYTES;
        assert_eq!(u64::from(entry.weight()), weight);
        cache.insert(key_of(&a, &i.to_string()), entry);
    }
    let stats = cache.stats();
    assert!(stats.bytes <= max_bytes, "{} bytes held", stats.bytes);
    assert!(
        stats.entries <= 9,
        "{} entries of 10 kB in 100 kB",
        stats.entries
    );
    assert!(stats.evictions >= 41, "{} evictions", stats.evictions);
    assert_eq!(stats.stores, 50);
}

#[test]
fn answers_too_large_or_unsuccessful_are_not_stored() {
    let (cache, _clock) = manual(CacheConfig {
        max_entry_bytes: 1_000,
        ..CacheConfig::default()
    });
    let a = tenant("a");
    let err = cache
        .entry(new_entry(&a, "m", vec![b'x'; 1_000]))
        .expect_err("too large");
    assert!(
        matches!(err, NotStored::TooLarge { max: 1_000, .. }),
        "{err}"
    );
    let mut failed = new_entry(&a, "m", "{}");
    failed.answer.status = 500;
    assert_eq!(
        cache.entry(failed).expect_err("a failure"),
        NotStored::Status(500)
    );
    assert_eq!(cache.stats().rejected, 2);
}

#[test]
fn tenant_b_never_sees_tenant_a_entry() {
    let (cache, _clock) = manual(CacheConfig::default());
    let (a, b) = (tenant("a"), tenant("b"));
    store(&cache, &a, "same question");
    assert!(
        cache
            .lookup(&key_of(&b, "same question"), true, None)
            .is_none()
    );
    assert!(
        cache
            .lookup(&key_of(&a, "same question"), true, None)
            .is_some()
    );

    // A namespace shared on purpose: whoever is configured into it hits.
    let shared = Scope::Shared("team".into());
    store(&cache, &shared, "same question");
    assert!(
        cache
            .lookup(&key_of(&shared, "same question"), true, None)
            .is_some()
    );
}

#[test]
fn stats_count_hits_misses_bypasses_and_saved_tokens() {
    let (cache, _clock) = manual(CacheConfig::default());
    let a = tenant("a");
    let key = store(&cache, &a, "q");
    cache.lookup(&key, true, None);
    cache.lookup(&key, true, None);
    cache.lookup(&key_of(&a, "other"), true, None);
    cache.record_bypass();
    cache.record_miss();
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.bypasses), (2, 2, 1));
    assert_eq!(stats.entries, 1);
    assert!(stats.bytes > 0);
    let m = stats.models.get("m").expect("counted per model");
    assert_eq!(
        (m.hits, m.saved_prompt_tokens, m.saved_completion_tokens),
        (2, 200, 40)
    );
}
