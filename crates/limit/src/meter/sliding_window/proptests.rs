//! Property tests of the sliding window against a brute-force oracle.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::tests::exact;
use super::*;
use crate::limit::EXACT_WINDOW_MAX;

/// What a schedule does, `dt` nanoseconds after the previous step.
#[derive(Debug, Clone)]
enum Op {
    /// If refused and `waits`, waits as told and takes then, as a
    /// queued waiter woken on time does.
    Take {
        dt: u64,
        cost: u64,
        waits: bool,
    },
    Refund {
        dt: u64,
        of: usize,
        amount: u64,
    },
    Debit {
        dt: u64,
        amount: u64,
    },
    Clamp {
        dt: u64,
        remaining: u64,
    },
}

impl Op {
    fn dt(&self) -> u64 {
        match *self {
            Op::Take { dt, .. }
            | Op::Refund { dt, .. }
            | Op::Debit { dt, .. }
            | Op::Clamp { dt, .. } => dt,
        }
    }
}

/// Steps of up to 2 windows (many at the same nanosecond, many within
/// one window), costs up to the capacity; `weights` of take, refund,
/// debit and clamp. Mostly debits come densely, to pile up debt entries.
fn ops(window: u64, capacity: u64, weights: [u32; 4]) -> impl Strategy<Value = Vec<Op>> {
    let dense = weights[2] > weights[0];
    let dt = if dense {
        prop_oneof![2 => Just(0), 16 => 0..window / 256 + 1, 1 => 0..window].boxed()
    } else {
        prop_oneof![
            Just(0),
            0..window / 64 + 1,
            0..window / 8 + 1,
            0..2 * window
        ]
        .boxed()
    };
    let cost = 1..=capacity;
    let take = (dt.clone(), cost.clone(), any::<bool>()).prop_map(|(dt, cost, waits)| Op::Take {
        dt,
        cost,
        waits,
    });
    let refund = (dt.clone(), any::<usize>(), cost.clone())
        .prop_map(|(dt, of, amount)| Op::Refund { dt, of, amount });
    let debit = (dt.clone(), cost).prop_map(|(dt, amount)| Op::Debit { dt, amount });
    let clamp = (dt, 0..=capacity).prop_map(|(dt, remaining)| Op::Clamp { dt, remaining });
    let [t, r, d, c] = weights;
    let op = prop_oneof![t => take, r => refund, d => debit, c => clamp];
    prop::collection::vec(op, 1..150)
}

fn exact_limits() -> impl Strategy<Value = (u64, u64)> {
    (1..=EXACT_WINDOW_MAX.min(40), 1u64..1_000_000)
}

fn any_limits() -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        exact_limits(),
        (EXACT_WINDOW_MAX + 1..3_000, 1u64..1_000_000)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// No window `(t − window, t]` ever holds more than the capacity,
    /// counting takes at what they cost after refunds, and debits: a
    /// brute-force oracle over everything recorded. Merged debt entries
    /// may hold more than the oracle, never less. Refunds are at most
    /// what the take still holds, as a grant's are.
    #[test]
    fn exact_never_holds_more_than_capacity(
        (capacity, window, ops) in (exact_limits(), prop_oneof![Just([6, 2, 1, 0]), Just([2, 1, 6, 0])])
            .prop_flat_map(|((c, w), weights)| (Just(c), Just(w), ops(w, c, weights))),
    ) {
        let mut w = exact(capacity, window);
        let mut now = 0u64;
        let mut net: BTreeMap<Nanos, u64> = BTreeMap::new();
        // (stamp, what that take still holds)
        let mut takes: Vec<(Stamp, u64)> = Vec::new();
        let mut debited = false;
        for op in ops {
            now += op.dt();
            match op {
                Op::Take { cost, waits, .. } => {
                    match w.check(now, cost) {
                        Ok(()) => {}
                        Err(Some(wait)) if waits => {
                            now += wait;
                            prop_assert_eq!(w.check(now, cost), Ok(()));
                        }
                        Err(_) => continue,
                    }
                    takes.push((w.take(now, cost), cost));
                    *net.entry(now).or_default() += cost;
                }
                Op::Refund { of, amount, .. } => {
                    let n = takes.len().max(1);
                    let Some((stamp, holds)) = takes.get_mut(of % n) else { continue };
                    let amount = amount.min(*holds);
                    *holds -= amount;
                    w.refund(now, *stamp, amount);
                    if *stamp + window > now {
                        *net.entry(*stamp).or_default() -= amount;
                    }
                }
                Op::Debit { amount, .. } => {
                    debited = true;
                    // What the meter took (it stops at one window of
                    // debt) is what the window holds from now on.
                    let before = w.available(now);
                    w.debit(now, amount);
                    let recorded = (before - w.available(now)).round() as u64;
                    prop_assert!(recorded <= amount);
                    prop_assert!(w.available(now) >= -(capacity as f64));
                    *net.entry(now).or_default() += recorded;
                }
                Op::Clamp { .. } => unreachable!(),
            }
            let held: u64 = net.range(now.saturating_sub(window - 1)..).map(|(_, c)| c).sum();
            if matches!(op, Op::Take { .. }) {
                prop_assert!(held <= capacity, "{held} in the window ending {now}");
            }
            let available = w.available(now);
            let oracle = capacity as f64 - held as f64;
            prop_assert!(available <= oracle, "{available} available, oracle {oracle}");
            if !debited {
                prop_assert_eq!(available, oracle);
            }
        }
    }

    /// `Err(Some(w))` is exact: refused at `now + w − 1`, admitted at
    /// `now + w`, whatever debits, refunds and clamps came before. Costs
    /// above the capacity always get a wait.
    #[test]
    fn the_wait_is_exact(
        (capacity, window, ops) in (any_limits(), prop_oneof![Just([6, 2, 1, 1]), Just([2, 1, 6, 1])])
            .prop_flat_map(|((c, w), weights)| (Just(c), Just(w), ops(w, c, weights))),
        seed in any::<u64>(),
    ) {
        let mut w = exact(capacity, window);
        let mut now = seed % (4 * window);
        let mut stamps = Vec::new();
        for op in ops {
            now += op.dt();
            apply(&mut w, now, &op, &mut stamps);
            let Op::Take { cost, .. } = op else { continue };
            if let Err(wait) = w.check(now, cost) {
                let wait = wait.expect("a sliding window always knows the wait");
                prop_assert!(wait > 0);
                prop_assert!(w.check(now + wait - 1, cost).is_err(), "admitted before {wait}");
                prop_assert_eq!(w.check(now + wait, cost), Ok(()), "refused after {}", wait);
            }
            prop_assert!(matches!(w.check(now, capacity + cost), Err(Some(n)) if n > 0));
        }
    }

    /// Refunds (and everything else) never lift availability above the
    /// capacity, in either representation.
    #[test]
    fn available_never_exceeds_capacity(
        (capacity, window, ops) in any_limits()
            .prop_flat_map(|(c, w)| (Just(c), Just(w), ops(w, c, [6, 2, 1, 1]))),
    ) {
        let mut w = exact(capacity, window);
        let mut now = 0;
        let mut stamps = Vec::new();
        for op in ops {
            now += op.dt();
            apply(&mut w, now, &op, &mut stamps);
            prop_assert!(w.available(now) <= capacity as f64);
            if w.is_idle(now) {
                prop_assert_eq!(w.available(now), capacity as f64);
            }
        }
    }

    /// The documented bound of the estimate: for aligned windows
    /// admitting `P` then `Q`, the last take of the second at offset `e`
    /// has `P·(window − e) + Q·window ≤ capacity·window`; and no sliding
    /// window holds `2·capacity` or more.
    #[test]
    fn estimate_stays_within_its_bound(
        capacity in EXACT_WINDOW_MAX + 1..3_000,
        window in 100u64..1_000_000,
        steps in prop::collection::vec(
            (prop_oneof![4 => 0u64..25, 1 => 0u64..300], 1u64..=600, any::<bool>()),
            1..300,
        ),
    ) {
        let mut w = exact(capacity, window);
        let mut now = 0u64;
        let mut admitted: Vec<(Nanos, u64)> = Vec::new();
        for (dt, cost, waits) in steps {
            // About 8 steps a window, sometimes skipping some.
            now += dt * window / 100;
            match w.check(now, cost) {
                Ok(()) => {}
                Err(Some(wait)) if waits => now += wait,
                Err(_) => continue,
            }
            prop_assert_eq!(w.check(now, cost), Ok(()));
            w.take(now, cost);
            admitted.push((now, cost));
        }
        let mut per_window: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for &(at, cost) in &admitted {
            let e = per_window.entry(at / window).or_default();
            e.0 += cost;
            e.1 = at % window;
        }
        for (&k, &(q, e)) in &per_window {
            let p = k.checked_sub(1).and_then(|k| per_window.get(&k)).map_or(0, |x| x.0);
            let lhs = p as u128 * (window - e) as u128 + q as u128 * window as u128;
            prop_assert!(lhs <= capacity as u128 * window as u128, "P {p} Q {q} at {e}");
            prop_assert!(p + q < 2 * capacity);
        }
        for (i, &(end, _)) in admitted.iter().enumerate() {
            let held: u64 = admitted[..=i]
                .iter()
                .filter(|(at, _)| at + window > end)
                .map(|(_, c)| c)
                .sum();
            prop_assert!(held < 2 * capacity, "{held} in one window");
        }
    }
}

fn apply(w: &mut SlidingWindow, now: Nanos, op: &Op, stamps: &mut Vec<Stamp>) {
    match *op {
        Op::Take { cost, .. } => {
            if w.check(now, cost).is_ok() {
                stamps.push(w.take(now, cost));
            }
        }
        Op::Refund { of, amount, .. } => {
            if let Some(&stamp) = stamps.get(of % stamps.len().max(1)) {
                w.refund(now, stamp, amount);
            }
        }
        Op::Debit { amount, .. } => w.debit(now, amount),
        Op::Clamp { remaining, .. } => w.clamp_available(now, remaining),
    }
}
