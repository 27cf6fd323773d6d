//! Budgets counted in a real `redis-server` (`SLUICE_TEST_REDIS_URL`), by
//! two clients standing for two gateway replicas.

use std::sync::Arc;
use std::time::Duration;

use sluice_usage::budget::{
    BudgetError, BudgetStore, Caps, Dimension, Period, RedisBudgets, Rule, Spend, Window,
};

fn redis_url() -> String {
    std::env::var("SLUICE_TEST_REDIS_URL").unwrap_or_else(|_| {
        panic!("SLUICE_TEST_REDIS_URL is not set: these tests need a redis-server (redis://127.0.0.1:PORT)")
    })
}

/// Two replicas on one Redis, under a prefix of this test's own.
fn pair(test: &str) -> (RedisBudgets, RedisBudgets) {
    let prefix = format!("t{}-{test}:", std::process::id());
    let url = redis_url();
    let one = || RedisBudgets::new(&url, &prefix, Duration::from_secs(2)).expect("a valid url");
    (one(), one())
}

fn money(n: u64) -> Spend {
    Spend {
        money: n,
        requests: 1,
        ..Spend::default()
    }
}

const NOW: i64 = 1_767_268_800_000; // 2026-01-01T12:00Z

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_overshoot_a_shared_budget() {
    const WORST: u64 = 1_000_000;
    let (a, b) = pair("overshoot");
    let rule = Rule {
        id: "tenant:acme:monthly".into(),
        caps: Caps {
            money: Some(10 * WORST),
            ..Caps::default()
        },
        window: Window::calendar(Period::Month, jiff::tz::TimeZone::UTC),
    };
    let stores: [Arc<dyn BudgetStore>; 2] = [Arc::new(a.clone()), Arc::new(b.clone())];
    // 50 calls at once, half through each replica, each reserving its
    // worst case and holding it until all have asked.
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let tasks: Vec<_> = (0..50u64)
        .map(|i| {
            let (store, rule, barrier) = (
                stores[(i % 2) as usize].clone(),
                rule.clone(),
                barrier.clone(),
            );
            tokio::spawn(async move {
                let got = store
                    .reserve(std::slice::from_ref(&rule), money(WORST), NOW)
                    .await;
                barrier.wait().await;
                got.map(|(r, standing)| (r, standing[0].spent.money))
            })
        })
        .collect();
    let mut held = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(h) => held.push(h),
            Err(BudgetError::Exceeded {
                dimension: Dimension::Money,
                cap,
                ..
            }) => assert_eq!(cap, 10 * WORST),
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    // Exactly the cap's worth was reserved while all were in flight.
    assert_eq!(held.len(), 10);
    assert!(held.iter().all(|(_, before)| before + WORST <= 10 * WORST));
    // Each used a quarter of its worst case: three quarters go back, on
    // either replica, and the next calls see the room.
    for (i, (r, _)) in held.iter().enumerate() {
        stores[i % 2].adjust(r, money(WORST / 4));
    }
    // The settles are written in the background: wait for them.
    let one = std::slice::from_ref(&rule);
    let mut settled = false;
    for _ in 0..200 {
        let (_, standing) = a.reserve(one, Spend::default(), NOW).await.unwrap();
        if standing[0].spent.money == 10 * (WORST / 4) {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(settled, "the settles never reached redis");
    let mut more = 0;
    while b.reserve(one, money(WORST), NOW).await.is_ok() {
        more += 1;
    }
    // 10 settled at a quarter each (2.5 worst cases) leave room for 7 more.
    assert_eq!(more, 7);
    assert_eq!(a.lost_settles() + b.lost_settles(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_names_the_budget_and_its_reset_and_touches_nothing() {
    let (a, b) = pair("refusal");
    let day = Rule {
        id: "key:k1:daily".into(),
        caps: Caps {
            requests: Some(1),
            ..Caps::default()
        },
        window: Window::calendar(
            Period::Day,
            jiff::tz::TimeZone::get("America/New_York").unwrap(),
        ),
    };
    let tokens = Rule {
        id: "tenant:t:tokens".into(),
        caps: Caps {
            tokens: Some(100),
            ..Caps::default()
        },
        window: Window::Rolling { ms: 3_600_000 },
    };
    let ask = Spend {
        tokens: 40,
        requests: 1,
        ..Spend::default()
    };
    let both = [tokens.clone(), day.clone()];
    a.reserve(&both, ask, NOW).await.unwrap();
    let e = b.reserve(&both, ask, NOW).await.unwrap_err();
    let BudgetError::Exceeded {
        budget,
        dimension,
        resets_at_ms,
        ..
    } = e
    else {
        panic!("expected a refusal, got {e}");
    };
    assert_eq!(
        (budget.as_str(), dimension),
        ("key:k1:daily", Dimension::Requests)
    );
    assert_eq!(resets_at_ms, NOW + 17 * 3_600_000); // midnight in New York
    // Refused whole: the token budget took nothing for it.
    let (_, standing) = b
        .reserve(std::slice::from_ref(&tokens), ask, NOW)
        .await
        .unwrap();
    assert_eq!(standing[0].spent.tokens, 40);
    // Next day in New York: room again.
    assert!(b.reserve(&both[1..], ask, resets_at_ms).await.is_ok());
    // Too large for a cap: refused without asking Redis.
    let huge = Spend {
        tokens: 101,
        ..Spend::default()
    };
    assert!(matches!(
        a.reserve(&[tokens], huge, NOW).await,
        Err(BudgetError::TooLarge { .. })
    ));
}

#[tokio::test]
async fn redis_away_is_an_error_not_a_grant() {
    let away = RedisBudgets::new("redis://127.0.0.1:1", "t:", Duration::from_millis(200)).unwrap();
    let rule = Rule {
        id: "x".into(),
        caps: Caps {
            requests: Some(5),
            ..Caps::default()
        },
        window: Window::Rolling { ms: 60_000 },
    };
    assert!(matches!(
        away.reserve(&[rule], money(1), NOW).await,
        Err(BudgetError::Store(_))
    ));
}
