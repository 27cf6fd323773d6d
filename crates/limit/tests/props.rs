//! Property tests of the limiter's invariants, on a manual clock.

use std::time::Duration;

use proptest::prelude::*;
use sluice_limit::{AdaptiveConfig, Algorithm, Limit, Limiter, ManualClock, Rules};

fn limiter(limit: Limit) -> (Limiter, ManualClock) {
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .clock(clock.clone())
        .rules(Rules::new().exact("r", limit))
        .build()
        .unwrap();
    (l, clock)
}

fn algorithms() -> impl Strategy<Value = Algorithm> {
    prop_oneof![
        Just(Algorithm::TokenBucket),
        Just(Algorithm::Gcra),
        Just(Algorithm::SlidingWindow),
    ]
}

fn limits() -> impl Strategy<Value = Limit> {
    (algorithms(), 1u64..50, 1u64..5_000, 1u64..60).prop_map(|(a, cap, window_ms, burst)| {
        Limit::new(cap, Duration::from_millis(window_ms))
            .burst(burst)
            .algorithm(a)
    })
}

/// (time step in µs, cost) pairs.
fn schedule() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..200_000, 1u64..8), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the arrivals, admitted cost ≤ rate·t + burst (buckets) or
    /// ≤ capacity per window (windows: checked over every window).
    #[test]
    fn never_admits_more_than_the_limit(limit in limits(), steps in schedule()) {
        let (l, clock) = limiter(limit);
        let mut t: u64 = 0;
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (dt, cost) in steps {
            clock.advance(Duration::from_micros(dt));
            t += dt * 1_000;
            if let Ok(g) = l.try_acquire("r", cost) {
                admitted.push((t, cost));
                drop(g);
            }
        }
        let window = limit.window().as_nanos() as u64;
        match limit.kind() {
            Algorithm::SlidingWindow => {
                for (i, (start, _)) in admitted.iter().enumerate() {
                    let in_window: u64 = admitted[i..]
                        .iter()
                        .take_while(|(at, _)| *at < start + window)
                        .map(|(_, c)| c)
                        .sum();
                    prop_assert!(in_window <= limit.capacity(), "{in_window} in one window");
                }
            }
            _ => {
                // Over every interval [a, b]: cost ≤ burst + rate·(b − a).
                for i in 0..admitted.len() {
                    let mut sum = 0u64;
                    for (at, c) in &admitted[i..] {
                        sum += c;
                        let allowed = limit.max_cost() as u128 * window as u128
                            + limit.capacity() as u128 * (at - admitted[i].0) as u128;
                        prop_assert!(sum as u128 * window as u128 <= allowed);
                    }
                }
            }
        }
    }

    /// A refusal's retry-after is exact: not a nanosecond early, and enough.
    #[test]
    fn no_grant_earlier_than_the_reported_wait(limit in limits(), steps in schedule()) {
        let (l, clock) = limiter(limit);
        for (dt, cost) in steps {
            clock.advance(Duration::from_micros(dt));
            let Err(e) = l.try_acquire("r", cost.min(limit.max_cost())) else { continue };
            let wait = e.retry_after().expect("rate limits always know the wait");
            prop_assert!(wait > Duration::ZERO);
            let cost = cost.min(limit.max_cost());
            if wait > Duration::from_nanos(1) {
                clock.advance(wait - Duration::from_nanos(1));
                prop_assert!(l.check("r", cost).is_err(), "granted before {wait:?}");
                clock.advance(Duration::from_nanos(1));
            } else {
                clock.advance(wait);
            }
            prop_assert!(l.try_acquire("r", cost).is_ok(), "not granted after {wait:?}");
        }
    }

    /// Refunds never lift availability above the maximum; settling at the
    /// reserved cost changes nothing.
    #[test]
    fn settle_invariants(limit in limits(), steps in schedule(), actual in 0u64..100) {
        let (l, clock) = limiter(limit);
        for (dt, cost) in steps {
            clock.advance(Duration::from_micros(dt));
            let cost = cost.min(limit.max_cost());
            let Ok(mut g) = l.try_acquire("r", cost) else { continue };
            let before = l.get_capacity("r").unwrap().available;
            g.settle(cost);
            prop_assert_eq!(l.get_capacity("r").unwrap().available, before);
            g.settle(actual);
            let cap = l.get_capacity("r").unwrap();
            prop_assert!(cap.available <= limit.max_cost() as f64 + 1e-9);
            g.settle(0);
            let cap = l.get_capacity("r").unwrap();
            prop_assert!(cap.available <= limit.max_cost() as f64 + 1e-9);
        }
    }

    /// No settle, however large and however often, leaves a resource owing
    /// more than one window's capacity: one window repays it, and the
    /// resource is full again after the time it takes to refill from empty.
    #[test]
    fn debt_is_at_most_one_window(limit in limits(), steps in schedule(), huge in any::<u64>()) {
        let (l, clock) = limiter(limit);
        let floor = -(limit.capacity() as f64) - 1e-9;
        for (dt, cost) in steps {
            clock.advance(Duration::from_micros(dt));
            let cost = cost.min(limit.max_cost());
            let Ok(mut g) = l.try_acquire("r", cost) else { continue };
            g.settle(huge);
            let cap = l.get_capacity("r").unwrap();
            prop_assert!(cap.available >= floor, "{} < {floor}", cap.available);
        }
        let refill = limit.max_cost().div_ceil(limit.capacity()) as u32;
        clock.advance(limit.window() * (1 + refill));
        prop_assert!(l.try_acquire("r", limit.max_cost()).is_ok());
    }

    /// The lock-free path (`check`, nothing held or queued) admits exactly
    /// what the locked path (`try_acquire`) admits, with the same waits.
    #[test]
    fn fast_path_matches_locked_path(limit in limits(), steps in schedule(), margin_us in prop_oneof![Just(0u64), 0u64..50_000]) {
        let margin = AdaptiveConfig {
            jitter_margin: Duration::from_micros(margin_us),
            ..AdaptiveConfig::default()
        };
        let with_margin = |limit| {
            let clock = ManualClock::new();
            let l = Limiter::builder()
                .clock(clock.clone())
                .adaptive(margin)
                .rules(Rules::new().exact("r", limit))
                .build()
                .unwrap();
            (l, clock)
        };
        let (a, ca) = with_margin(limit);
        let (b, cb) = with_margin(limit);
        let h = b.handle("r").unwrap();
        for (i, (dt, cost)) in steps.into_iter().enumerate() {
            ca.advance(Duration::from_micros(dt));
            cb.advance(Duration::from_micros(dt));
            let ra = a.try_acquire("r", cost).map(drop).map_err(|e| e.retry_after());
            let rb = if i % 2 == 0 { b.check("r", cost) } else { h.check(cost) };
            prop_assert_eq!(ra, rb.map_err(|e| e.retry_after()));
        }
    }

    /// GCRA and the token bucket admit the same schedule.
    #[test]
    fn gcra_matches_token_bucket(cap in 1u64..50, window_ms in 1u64..5_000, burst in 1u64..60, steps in schedule()) {
        let base = Limit::new(cap, Duration::from_millis(window_ms)).burst(burst);
        let (a, ca) = limiter(base);
        let (b, cb) = limiter(base.algorithm(Algorithm::Gcra));
        for (dt, cost) in steps {
            ca.advance(Duration::from_micros(dt));
            cb.advance(Duration::from_micros(dt));
            let ra = a.try_acquire("r", cost).map(drop).map_err(|e| e.retry_after());
            let rb = b.try_acquire("r", cost).map(drop).map_err(|e| e.retry_after());
            prop_assert_eq!(ra, rb);
        }
    }
}
