use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::tz::TimeZone;

use super::*;

fn rule(id: &str, caps: Caps, window: Window) -> Rule {
    Rule {
        id: id.into(),
        caps,
        window,
    }
}

fn tokens(n: u64) -> Spend {
    Spend {
        tokens: n,
        requests: 1,
        ..Spend::default()
    }
}

const HOUR: i64 = 3_600_000;

#[test]
fn all_budgets_or_none() {
    let m = MemoryBudgets::new();
    let key = rule(
        "key:k:a",
        Caps {
            tokens: Some(100),
            ..Caps::default()
        },
        Window::Rolling { ms: HOUR },
    );
    let tenant = rule(
        "tenant:t:b",
        Caps {
            requests: Some(1),
            ..Caps::default()
        },
        Window::Rolling { ms: HOUR },
    );
    let both = [key.clone(), tenant.clone()];
    let (_, standing) = m.reserve_now(&both, tokens(60), 0).unwrap();
    assert_eq!(standing[0].spent, Spend::default());
    // The tenant has no request left: the key's count is not touched.
    let e = m.reserve_now(&both, tokens(10), 1).unwrap_err();
    assert!(
        matches!(&e, BudgetError::Exceeded { budget, dimension: Dimension::Requests, .. } if budget == "tenant:t:b"),
        "{e}"
    );
    assert_eq!(m.spent(&key, 1).tokens, 60);
    // A call bigger than a cap can never fit: no wait is promised.
    let e = m
        .reserve_now(std::slice::from_ref(&key), tokens(101), 2)
        .unwrap_err();
    assert!(matches!(e, BudgetError::TooLarge { cap: 100, .. }), "{e}");
}

#[test]
fn settling_gives_back_what_was_not_used() {
    let m = MemoryBudgets::new();
    let r = rule(
        "t",
        Caps {
            tokens: Some(100),
            ..Caps::default()
        },
        Window::Rolling { ms: HOUR },
    );
    let rules = [r.clone()];
    let (a, _) = m.reserve_now(&rules, tokens(80), 0).unwrap();
    assert!(m.reserve_now(&rules, tokens(30), 0).is_err());
    m.adjust_now(&a, tokens(20));
    assert_eq!(m.spent(&r, 0).tokens, 20);
    let (b, standing) = m.reserve_now(&rules, tokens(30), 0).unwrap();
    assert_eq!(standing[0].spent.tokens, 20);
    assert!((standing[0].used(tokens(30)) - 0.5).abs() < 1e-9);
    // A failure that cost nothing gives everything back.
    Hold::new(Arc::new(MemoryBudgets::new()), b.clone()).release();
    m.adjust_now(&b, Spend::default());
    assert_eq!(m.spent(&r, 0), tokens(20));
}

#[test]
fn a_refusal_says_when_the_oldest_spend_leaves() {
    let m = MemoryBudgets::new();
    let r = [rule(
        "t",
        Caps {
            requests: Some(2),
            ..Caps::default()
        },
        Window::Rolling { ms: HOUR },
    )];
    m.reserve_now(&r, tokens(1), 10 * 60_000).unwrap();
    m.reserve_now(&r, tokens(1), 30 * 60_000).unwrap();
    let Err(BudgetError::Exceeded { resets_at_ms, .. }) = m.reserve_now(&r, tokens(1), 40 * 60_000)
    else {
        panic!("expected a refusal");
    };
    // The first call's slice leaves the hour at 11 minutes past the next.
    assert_eq!(resets_at_ms, 70 * 60_000);
    assert!(m.reserve_now(&r, tokens(1), resets_at_ms - 1).is_err());
    assert!(m.reserve_now(&r, tokens(1), resets_at_ms).is_ok());

    // A calendar budget starts over at the next period, in its zone.
    let day = [rule(
        "d",
        Caps {
            requests: Some(1),
            ..Caps::default()
        },
        Window::calendar(Period::Day, TimeZone::get("America/New_York").unwrap()),
    )];
    let noon_utc = 1_767_268_800_000; // 2026-01-01T12:00Z, 07:00 in New York
    m.reserve_now(&day, tokens(1), noon_utc).unwrap();
    let Err(BudgetError::Exceeded { resets_at_ms, .. }) = m.reserve_now(&day, tokens(1), noon_utc)
    else {
        panic!("expected a refusal");
    };
    assert_eq!(resets_at_ms, noon_utc + 17 * HOUR); // 2026-01-02T05:00Z
    assert!(m.reserve_now(&day, tokens(1), resets_at_ms).is_ok());
}

/// Spend read back after a restart counts in the slice it was made in,
/// and leaves the window with it.
#[test]
fn seeded_spend_counts_where_it_was_made() {
    let m = MemoryBudgets::new();
    let r = rule(
        "t",
        Caps {
            requests: Some(3),
            ..Caps::default()
        },
        Window::Rolling { ms: HOUR },
    );
    let now = 90 * 60_000;
    // Before the window (left out), in it at 40 and 80 minutes, after now
    // (left out).
    let before = [
        (20 * 60_000, tokens(1)),
        (40 * 60_000, tokens(1)),
        (80 * 60_000, tokens(1)),
        (now + 60_000, tokens(1)),
    ];
    m.seed(&r, &before, now);
    assert_eq!(
        m.spent(&r, now),
        Spend {
            tokens: 2,
            requests: 2,
            ..Spend::default()
        }
    );
    m.reserve_now(std::slice::from_ref(&r), tokens(1), now)
        .unwrap();
    let Err(BudgetError::Exceeded { resets_at_ms, .. }) =
        m.reserve_now(std::slice::from_ref(&r), tokens(1), now)
    else {
        panic!("seeded spend counts");
    };
    // The 40 minutes' spend leaves the hour at 100 minutes.
    assert_eq!(resets_at_ms, 100 * 60_000);
    assert_eq!(m.spent(&r, resets_at_ms).requests, 2);
}

/// The overshoot bound: 50 calls at once against a budget of 10 calls'
/// worst case. However they interleave, what is reserved never passes the
/// cap, and what is spent once all settle is at most the cap.
#[test]
fn concurrent_calls_never_overshoot_the_cap() {
    const WORST: u64 = 1_000;
    for round in 0..20 {
        let m = Arc::new(MemoryBudgets::new());
        let r = rule(
            "t",
            Caps {
                money: Some(10 * WORST),
                ..Caps::default()
            },
            Window::Rolling { ms: HOUR },
        );
        let spent = Arc::new(AtomicU64::new(0));
        let admitted = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..50u64)
            .map(|i| {
                let (m, r, spent, admitted) =
                    (m.clone(), r.clone(), spent.clone(), admitted.clone());
                std::thread::spawn(move || {
                    let ask = Spend {
                        money: WORST,
                        ..Spend::default()
                    };
                    if let Ok((res, standing)) = m.reserve_now(std::slice::from_ref(&r), ask, 0) {
                        assert!(standing[0].spent.money + WORST <= 10 * WORST);
                        admitted.fetch_add(1, Ordering::SeqCst);
                        // What it really cost: up to its worst case.
                        let used = (i * 7 + round) % (WORST + 1);
                        spent.fetch_add(used, Ordering::SeqCst);
                        m.adjust_now(
                            &res,
                            Spend {
                                money: used,
                                ..Spend::default()
                            },
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total = spent.load(Ordering::SeqCst);
        assert!(total <= 10 * WORST, "round {round}: spent {total}");
        assert_eq!(m.spent(&r, 0).money, total);
        assert!(admitted.load(Ordering::SeqCst) >= 10);
    }
}
