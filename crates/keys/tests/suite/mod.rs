//! The store's behaviour, the same on every backend: `store_tests!(F)`
//! runs each test here on the stores that `F` makes.

#![allow(dead_code)]

use std::time::Duration;

use sluice_keys::{
    AuthError, Budget, Change, Error, KeyCache, KeyState, KeyStore, Limits, ManualClock, Money,
    NewKey, NewTenant, Period, Refusal, TenantState, Timestamp, Update,
};

/// 2026-01-01T00:00:00Z.
pub const T0: i64 = 1_767_225_600_000;

/// Makes an empty store on a clock.
pub trait Factory {
    fn make(&self, clock: ManualClock) -> impl Future<Output = KeyStore>;
}

macro_rules! store_tests {
    ($factory:expr) => {
        store_tests!(@each $factory;
            tiers_are_named_sets_of_limits,
            tenants_refer_to_tiers_and_can_be_blocked,
            keys_are_shown_once_and_checked_by_hash,
            rotation_keeps_the_old_key_for_its_grace,
            revoke_and_block,
            a_tier_change_applies_to_its_members,
            concurrent_rotations_issue_one_key,
            budgets_are_kept_and_follow_their_tier,
            deleted_keys_and_tenants_are_gone,
        );
    };
    (@each $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                suite::$name(&$factory).await;
            }
        )*
    };
}
pub(crate) use store_tests;

fn limits_rpm(n: u64) -> Limits {
    Limits {
        requests_per_minute: Some(n),
        ..Limits::default()
    }
}

fn tenant(name: &str, tier: Option<&str>) -> NewTenant {
    NewTenant {
        name: name.into(),
        tier: tier.map(Into::into),
        ..NewTenant::default()
    }
}

fn key_for(tenant: &str) -> NewKey {
    NewKey {
        tenant: tenant.into(),
        ..NewKey::default()
    }
}

fn field_of(e: Error) -> String {
    match e {
        Error::Invalid { field, .. } => field,
        other => panic!("expected an invalid field, got {other}"),
    }
}

fn refusal(r: Result<std::sync::Arc<sluice_keys::Caller>, AuthError>) -> Refusal {
    match r {
        Err(AuthError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn tiers_are_named_sets_of_limits(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    let t = s.create_tier("free", &limits_rpm(60)).await.unwrap();
    assert_eq!((t.name.as_str(), t.created_at), ("free", T0));
    assert!(matches!(
        s.create_tier("free", &limits_rpm(1)).await,
        Err(Error::Conflict { what: "tier", .. })
    ));
    assert!(matches!(
        s.update_tier("gold", &limits_rpm(1)).await,
        Err(Error::NotFound { what: "tier", .. })
    ));
    let bad = Limits {
        tokens_per_minute: Some(0),
        ..Limits::default()
    };
    assert_eq!(
        field_of(s.create_tier("pro", &bad).await.unwrap_err()),
        "limits.tokens_per_minute"
    );
    assert_eq!(
        field_of(
            s.create_tier("has space", &limits_rpm(1))
                .await
                .unwrap_err()
        ),
        "name"
    );
    s.update_tier("free", &limits_rpm(30)).await.unwrap();
    s.create_tier("pro", &limits_rpm(600)).await.unwrap();
    let all = s.tiers().await.unwrap();
    let names: Vec<_> = all.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["free", "pro"]);
    assert_eq!(all[0].limits.requests_per_minute, Some(30));
    assert_eq!(s.tier("nope").await.unwrap(), None);
}

pub async fn tenants_refer_to_tiers_and_can_be_blocked(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    assert_eq!(
        field_of(
            s.create_tenant(&tenant("acme", Some("free")))
                .await
                .unwrap_err()
        ),
        "tier"
    );
    s.create_tier("free", &limits_rpm(60)).await.unwrap();
    let t = s
        .create_tenant(&tenant("acme", Some("free")))
        .await
        .unwrap();
    assert_eq!(
        (t.tier.as_deref(), t.state),
        (Some("free"), TenantState::Active)
    );
    assert!(matches!(
        s.create_tenant(&tenant("acme", None)).await,
        Err(Error::Conflict { what: "tenant", .. })
    ));
    let mut bad = tenant("globex", None);
    bad.tags = vec!["ok".into(), String::new()];
    assert_eq!(
        field_of(s.create_tenant(&bad).await.unwrap_err()),
        "tags[1]"
    );

    let u = Update {
        tier: Some(None),
        limits: Some(limits_rpm(5)),
        tags: Some(vec!["team-a".into()]),
        ..Update::default()
    };
    let t = s.update_tenant("acme", &u).await.unwrap();
    assert_eq!(t.tier, None);
    assert_eq!(t.limits.requests_per_minute, Some(5));
    assert_eq!(t.tags, ["team-a"]);
    assert!(matches!(
        s.update_tenant("nobody", &u).await,
        Err(Error::NotFound { what: "tenant", .. })
    ));

    assert_eq!(
        s.block_tenant("acme").await.unwrap().state,
        TenantState::Blocked
    );
    assert_eq!(
        s.block_tenant("acme").await.unwrap().state,
        TenantState::Blocked
    );
    assert_eq!(
        s.unblock_tenant("acme").await.unwrap().state,
        TenantState::Active
    );
    assert_eq!(s.tenants().await.unwrap().len(), 1);

    // A blocked tenant's keys are refused; unblocked, they work again.
    let k = s.issue_key(&key_for("acme")).await.unwrap();
    let cache = KeyCache::new(s.clone());
    assert!(cache.authenticate(&k.key).await.is_ok());
    s.block_tenant("acme").await.unwrap();
    cache.invalidate(&Change::Tenant("acme".into()));
    assert_eq!(
        refusal(cache.authenticate(&k.key).await),
        Refusal::TenantBlocked
    );
    s.unblock_tenant("acme").await.unwrap();
    cache.invalidate(&Change::Tenant("acme".into()));
    assert!(cache.authenticate(&k.key).await.is_ok());
}

pub async fn keys_are_shown_once_and_checked_by_hash(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    assert!(matches!(
        s.issue_key(&key_for("acme")).await,
        Err(Error::NotFound { what: "tenant", .. })
    ));
    s.create_tenant(&tenant("acme", None)).await.unwrap();
    let mut new = key_for("acme");
    new.name = Some("ci".into());
    let k = s.issue_key(&new).await.unwrap();
    assert!(k.key.starts_with(&format!("sk-sluice-{}_", k.record.id)));
    assert_eq!(k.record.state, KeyState::Active);

    // What is listed never holds the secret.
    let listed = s.keys(Some("acme")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], k.record);
    let secret = k.key.rsplit('_').next().unwrap();
    assert!(!format!("{listed:?}").contains(secret));
    assert_eq!(s.keys(Some("other")).await.unwrap(), []);

    let cache = KeyCache::new(s.clone());
    let caller = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(
        (&*caller.tenant, &*caller.key_id),
        ("acme", k.record.id.as_str())
    );

    // The right id with another secret, or not a key at all.
    let mut forged = k.key.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    assert_eq!(refusal(cache.authenticate(&forged).await), Refusal::Unknown);
    assert_eq!(
        refusal(cache.authenticate("sk-1234").await),
        Refusal::Malformed
    );
    let other = k.key.replace(&k.record.id, "0123456789ab");
    assert_eq!(refusal(cache.authenticate(&other).await), Refusal::Unknown);

    // A label that is not one.
    let mut bad = key_for("acme");
    bad.name = Some("a\nb".into());
    assert_eq!(field_of(s.issue_key(&bad).await.unwrap_err()), "name");
}

pub async fn rotation_keeps_the_old_key_for_its_grace(f: &impl Factory) {
    let clock = ManualClock::new(Timestamp::from_millis(T0));
    let s = f.make(clock.clone()).await;
    s.create_tenant(&tenant("acme", None)).await.unwrap();
    let mut new = key_for("acme");
    new.limits = limits_rpm(7);
    let old = s.issue_key(&new).await.unwrap();
    let cache = KeyCache::new(s.clone());
    assert!(cache.authenticate(&old.key).await.is_ok());

    let (fresh, previous) = s
        .rotate_key(&old.record.id, Duration::from_secs(60))
        .await
        .unwrap();
    cache.invalidate(&Change::Key(old.record.id.clone()));
    assert_eq!(previous.state, KeyState::Rotated);
    assert_eq!(previous.grace_until, Some(T0 + 60_000));
    assert_eq!(
        previous.replaced_by.as_deref(),
        Some(fresh.record.id.as_str())
    );
    assert_eq!(fresh.record.limits, new.limits);
    assert!(cache.authenticate(&old.key).await.is_ok());
    assert!(cache.authenticate(&fresh.key).await.is_ok());

    // A rotated key cannot be rotated again.
    assert!(matches!(
        s.rotate_key(&old.record.id, Duration::ZERO).await,
        Err(Error::WrongState {
            action: "rotate",
            state: "rotated",
            ..
        })
    ));
    assert_eq!(
        field_of(
            s.rotate_key(&fresh.record.id, Duration::from_secs(31 * 86_400))
                .await
                .unwrap_err()
        ),
        "grace_seconds"
    );

    clock.advance(Duration::from_millis(59_999));
    assert!(cache.authenticate(&old.key).await.is_ok());
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        refusal(cache.authenticate(&old.key).await),
        Refusal::Expired
    );
    assert!(cache.authenticate(&fresh.key).await.is_ok());
}

pub async fn revoke_and_block(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    s.create_tenant(&tenant("acme", None)).await.unwrap();
    let k = s.issue_key(&key_for("acme")).await.unwrap();
    let id = k.record.id.clone();
    let cache = KeyCache::new(s.clone());
    let change = Change::Key(id.clone());
    assert!(cache.authenticate(&k.key).await.is_ok());

    assert_eq!(s.block_key(&id).await.unwrap().state, KeyState::Blocked);
    // Cached as it was until told otherwise: the cache is what requests see.
    assert!(cache.authenticate(&k.key).await.is_ok());
    cache.invalidate(&change);
    assert_eq!(
        refusal(cache.authenticate(&k.key).await),
        Refusal::KeyBlocked
    );
    assert_eq!(s.unblock_key(&id).await.unwrap().state, KeyState::Active);
    cache.invalidate(&change);
    assert!(cache.authenticate(&k.key).await.is_ok());

    assert_eq!(s.revoke_key(&id).await.unwrap().state, KeyState::Revoked);
    assert_eq!(s.revoke_key(&id).await.unwrap().state, KeyState::Revoked);
    cache.invalidate(&change);
    assert_eq!(refusal(cache.authenticate(&k.key).await), Refusal::Revoked);
    for r in [s.unblock_key(&id).await, s.block_key(&id).await] {
        assert!(
            matches!(
                r,
                Err(Error::WrongState {
                    state: "revoked",
                    ..
                })
            ),
            "{r:?}"
        );
    }
    assert!(matches!(
        s.revoke_key("0123456789ab").await,
        Err(Error::NotFound { what: "key", .. })
    ));
}

pub async fn a_tier_change_applies_to_its_members(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    s.create_tier("free", &limits_rpm(60)).await.unwrap();
    let pro = Limits {
        tokens_per_minute: Some(10_000),
        models: Some(vec!["openai/*".into()]),
        ..Limits::default()
    };
    s.create_tier("pro", &pro).await.unwrap();
    s.create_tenant(&tenant("acme", Some("free")))
        .await
        .unwrap();
    let mut new = key_for("acme");
    new.tier = Some("pro".into());
    new.limits = Limits {
        tokens_per_minute: Some(500),
        ..Limits::default()
    };
    let k = s.issue_key(&new).await.unwrap();
    let cache = KeyCache::with_ttls(
        s.clone(),
        Duration::from_secs(3_600),
        Duration::from_secs(3_600),
    );
    let c = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(c.tenant_limits.requests_per_minute, Some(60));
    // The key's own value wins over its tier's; the rest is the tier's.
    assert_eq!(c.key_limits.tokens_per_minute, Some(500));
    assert!(c.allows_model("openai/gpt-4o") && !c.allows_model("anthropic/claude-3"));

    s.update_tier("free", &limits_rpm(6)).await.unwrap();
    let c = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(c.tenant_limits.requests_per_minute, Some(60), "cached");
    cache.invalidate(&Change::Tier("free".into()));
    let c = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(c.tenant_limits.requests_per_minute, Some(6));

    // Key updates: a tier that does not exist is refused by name.
    let u = Update {
        tier: Some(Some("gold".into())),
        ..Update::default()
    };
    assert_eq!(
        field_of(s.update_key(&k.record.id, &u).await.unwrap_err()),
        "tier"
    );
    let u = Update {
        tier: Some(None),
        ..Update::default()
    };
    let r = s.update_key(&k.record.id, &u).await.unwrap();
    assert_eq!((r.tier, r.limits.tokens_per_minute), (None, Some(500)));
    cache.invalidate(&Change::Key(k.record.id.clone()));
    let c = cache.authenticate(&k.key).await.unwrap();
    assert!(c.allows_model("anthropic/claude-3"));
}

pub async fn concurrent_rotations_issue_one_key(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    s.create_tenant(&tenant("acme", None)).await.unwrap();
    for _ in 0..5 {
        let k = s.issue_key(&key_for("acme")).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                let id = k.record.id.clone();
                tokio::spawn(async move { s.rotate_key(&id, Duration::from_secs(10)).await })
            })
            .collect();
        let mut won = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => won += 1,
                Err(Error::WrongState { .. }) => {}
                Err(e) => panic!("unexpected: {e}"),
            }
        }
        assert_eq!(won, 1);
    }
    // One original and one replacement per round, nothing half-made.
    let keys = s.keys(Some("acme")).await.unwrap();
    assert_eq!(keys.len(), 10);
    let rotated = keys.iter().filter(|k| k.state == KeyState::Rotated).count();
    assert_eq!(rotated, 5);
}

fn budget(name: &str, requests: u64) -> Budget {
    Budget {
        name: name.into(),
        money: None,
        tokens: None,
        requests: Some(requests),
        period: Some(Period::Month),
        time_zone: Some("Europe/Paris".into()),
        window_seconds: None,
    }
}

pub async fn budgets_are_kept_and_follow_their_tier(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    let mut monthly = budget("monthly", 1_000);
    monthly.money = Some(Money::from_nanodollars(25_000_000_000));
    let t = s
        .create_tier_with("pro", &Limits::default(), std::slice::from_ref(&monthly))
        .await
        .unwrap();
    assert_eq!(t.budgets, [monthly.clone()]);
    // A bad budget is refused by its field, and nothing is created.
    let mut bad = budget("daily", 10);
    bad.time_zone = Some("Nowhere/Atlantis".into());
    assert_eq!(
        field_of(
            s.create_tier_with("gold", &Limits::default(), &[bad.clone()])
                .await
                .unwrap_err()
        ),
        "budgets[0].time_zone"
    );
    assert!(s.tier("gold").await.unwrap().is_none());
    let mut new = tenant("acme", Some("pro"));
    new.budgets = vec![budget("daily", 50)];
    let acme = s.create_tenant(&new).await.unwrap();
    assert_eq!(acme.budgets, new.budgets);
    let k = s.issue_key(&key_for("acme")).await.unwrap();
    let cache = KeyCache::with_ttls(
        s.clone(),
        Duration::from_secs(3_600),
        Duration::from_secs(3_600),
    );
    let c = cache.authenticate(&k.key).await.unwrap();
    let names = |b: &[Budget]| b.iter().map(|b| b.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&c.tenant_budgets), ["daily", "monthly"]);
    assert!(c.key_budgets.is_empty());

    // The tier's change reaches its members (once the cache hears of it).
    let mut cheaper = budget("monthly", 10);
    cheaper.window_seconds = Some(86_400);
    cheaper.period = None;
    cheaper.time_zone = None;
    s.update_tier_with("pro", None, Some(std::slice::from_ref(&cheaper)))
        .await
        .unwrap();
    cache.invalidate(&Change::Tier("pro".into()));
    let c = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(c.tenant_budgets[1], cheaper);

    // A tenant's own budget of a name wins over its tier's; updates
    // replace the list whole and are checked by field.
    let u = Update {
        budgets: Some(vec![budget("monthly", 3)]),
        ..Update::default()
    };
    let acme = s.update_tenant("acme", &u).await.unwrap();
    assert_eq!(names(&acme.budgets), ["monthly"]);
    cache.invalidate(&Change::Tenant("acme".into()));
    let c = cache.authenticate(&k.key).await.unwrap();
    assert_eq!(c.tenant_budgets.len(), 1);
    assert_eq!(c.tenant_budgets[0].requests, Some(3));
    let u = Update {
        budgets: Some(vec![budget("a", 1), budget("a", 2)]),
        ..Update::default()
    };
    assert_eq!(
        field_of(s.update_key(&k.record.id, &u).await.unwrap_err()),
        "budgets[1].name"
    );
    // A key's budgets travel with it through a rotation.
    let u = Update {
        budgets: Some(vec![budget("mine", 7)]),
        ..Update::default()
    };
    s.update_key(&k.record.id, &u).await.unwrap();
    let (rotated, _) = s
        .rotate_key(&k.record.id, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(names(&rotated.record.budgets), ["mine"]);
}

pub async fn deleted_keys_and_tenants_are_gone(f: &impl Factory) {
    let s = f.make(ManualClock::new(Timestamp::from_millis(T0))).await;
    for t in ["acme", "globex"] {
        s.create_tenant(&tenant(t, None)).await.unwrap();
    }
    let a1 = s.issue_key(&key_for("acme")).await.unwrap();
    let a2 = s.issue_key(&key_for("acme")).await.unwrap();
    let g = s.issue_key(&key_for("globex")).await.unwrap();
    // A rotated key and its replacement go together with their tenant.
    let (a3, _) = s
        .rotate_key(&a2.record.id, Duration::from_secs(60))
        .await
        .unwrap();
    let cache = KeyCache::new(s.clone());
    assert!(cache.authenticate(&a1.key).await.is_ok());

    // One key, whatever its state.
    let gone = s.delete_key(&a1.record.id).await.unwrap();
    assert_eq!(gone.id, a1.record.id);
    assert!(s.key(&a1.record.id).await.unwrap().is_none());
    cache.invalidate(&Change::Key(a1.record.id.clone()));
    assert_eq!(refusal(cache.authenticate(&a1.key).await), Refusal::Unknown);
    assert!(matches!(
        s.delete_key(&a1.record.id).await,
        Err(Error::NotFound { what: "key", .. })
    ));

    // A tenant and every key of it, and nothing of another tenant.
    let (t, keys) = s.delete_tenant("acme").await.unwrap();
    assert_eq!(t.name, "acme");
    let mut ids: Vec<String> = keys.into_iter().map(|k| k.id).collect();
    ids.sort();
    let mut want = vec![a2.record.id.clone(), a3.record.id.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert!(s.tenant("acme").await.unwrap().is_none());
    assert!(s.keys(Some("acme")).await.unwrap().is_empty());
    cache.invalidate(&Change::Tenant("acme".into()));
    for k in [&a2.key, &a3.key] {
        assert_eq!(refusal(cache.authenticate(k).await), Refusal::Unknown);
    }
    assert!(
        cache.authenticate(&g.key).await.is_ok(),
        "another tenant's key still works"
    );
    assert_eq!(s.keys(Some("globex")).await.unwrap().len(), 1);
    assert!(matches!(
        s.delete_tenant("acme").await,
        Err(Error::NotFound { what: "tenant", .. })
    ));
    // The name may be used again, from nothing.
    s.create_tenant(&tenant("acme", None)).await.unwrap();
    assert!(s.keys(Some("acme")).await.unwrap().is_empty());
}
