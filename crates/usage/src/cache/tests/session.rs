//! The per-session store and invalidation.

use super::store::{key_of, manual, new_entry, store, tenant};
use crate::cache::{CacheConfig, CacheKey, Invalidate, SessionId};

#[test]
fn a_session_keeps_its_last_answers() {
    let (cache, _clock) = manual(CacheConfig::default());
    let a = tenant("a");
    let session = SessionId::new(a.clone(), "run-1").expect("valid id");
    let keys: Vec<CacheKey> = (0..12).map(|i| key_of(&a, &format!("q{i}"))).collect();
    for key in &keys {
        let entry = cache.entry(new_entry(&a, "m", "{}")).expect("storable");
        cache.remember(&session, *key, entry);
    }
    assert_eq!(cache.session_len(&session), 10);
    // Not in the shared store, only in the session's last ten.
    assert!(
        cache.lookup(&keys[0], true, Some(&session)).is_none(),
        "oldest dropped"
    );
    let hit = cache.lookup(&keys[2], true, Some(&session)).expect("kept");
    assert!(hit.from_session);
    // Another session of the same tenant, or the same id elsewhere: nothing.
    let other = SessionId::new(a, "run-2").expect("valid id");
    assert!(cache.lookup(&keys[5], true, Some(&other)).is_none());
    let elsewhere = SessionId::new(tenant("b"), "run-1").expect("valid id");
    assert!(cache.lookup(&keys[5], true, Some(&elsewhere)).is_none());

    // keys[2] was used last: two more answers push out 3 and 4, not 2.
    for i in 12..14 {
        let entry = cache
            .entry(new_entry(&tenant("a"), "m", "{}"))
            .expect("storable");
        cache.remember(&session, key_of(&tenant("a"), &format!("q{i}")), entry);
    }
    assert!(cache.lookup(&keys[2], false, Some(&session)).is_some());
    assert!(cache.lookup(&keys[3], false, Some(&session)).is_none());
}

#[test]
fn session_ids_are_checked() {
    let a = tenant("a");
    assert!(SessionId::new(a.clone(), "").is_err());
    assert!(SessionId::new(a.clone(), "has space").is_err());
    assert!(SessionId::new(a.clone(), &"x".repeat(129)).is_err());
    assert!(SessionId::new(a, &"x".repeat(128)).is_ok());
}

#[test]
fn invalidation_by_scope_model_and_key_prefix() {
    let (cache, _clock) = manual(CacheConfig::default());
    let (a, b) = (tenant("a"), tenant("b"));
    let ka = store(&cache, &a, "q1");
    let kb = store(&cache, &b, "q1");
    let other_model = key_of(&a, "q2");
    cache.insert(
        other_model,
        cache.entry(new_entry(&a, "n", "{}")).expect("storable"),
    );
    let session = SessionId::new(a.clone(), "s").expect("valid id");
    cache.remember(
        &session,
        ka,
        cache.entry(new_entry(&a, "m", "{}")).expect("storable"),
    );

    let by_model = Invalidate {
        model: Some("n".into()),
        ..Invalidate::default()
    };
    assert_eq!(cache.invalidate(&by_model), 1);
    assert!(cache.lookup(&other_model, true, None).is_none());

    let prefix = Invalidate {
        key_prefix: Some(kb.to_hex()[..10].to_owned()),
        ..Invalidate::default()
    };
    assert_eq!(cache.invalidate(&prefix), 1);
    assert!(cache.lookup(&kb, true, None).is_none());

    // Tenant a's entries, in the store and in its sessions.
    let mine = Invalidate {
        scope: Some(a),
        ..Invalidate::default()
    };
    assert_eq!(cache.invalidate(&mine), 2);
    assert!(cache.lookup(&ka, true, Some(&session)).is_none());
    assert_eq!(cache.invalidate(&Invalidate::default()), 0);
}
