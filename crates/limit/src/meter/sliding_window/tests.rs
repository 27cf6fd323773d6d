//! Unit tests of the sliding window, with paused (injected) time.

use std::time::Duration;

use super::*;

const S: u64 = 1_000_000_000;
const MIN: u64 = 60 * S;

/// A sliding window of `capacity` per `window` nanoseconds, at time 0.
pub(super) fn exact(capacity: u64, window: u64) -> SlidingWindow {
    SlidingWindow::new(
        &Limit::sliding_window(capacity, Duration::from_nanos(window)),
        0,
    )
}

fn take_ok(w: &mut SlidingWindow, now: Nanos, cost: u64) -> Stamp {
    assert_eq!(w.check(now, cost), Ok(()), "{cost} at {now}");
    w.take(now, cost)
}

#[test]
fn seed_session_limit_refuses_the_eleventh_until_the_first_expires() {
    let mut w = SlidingWindow::new(&Limit::sliding_window(10, Duration::from_secs(60)), 0);
    for i in 0..10 {
        take_ok(&mut w, i * S, 1);
    }
    assert_eq!(w.check(10 * S, 1), Err(Some(50 * S)));
    assert_eq!(
        w.check(MIN - 1, 1),
        Err(Some(1)),
        "not one nanosecond early"
    );
    take_ok(&mut w, MIN, 1);
    // The next one waits for the take at 1 s.
    assert_eq!(w.check(MIN, 1), Err(Some(S)));
    assert_eq!(w.available(MIN), 0.0);
}

#[test]
fn weighted_costs_wait_for_enough_to_expire() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 0, 4);
    take_ok(&mut w, S, 5);
    assert_eq!(w.check(2 * S, 1), Ok(()));
    // 3 needs 2 more: the 4 taken at 0 must leave.
    assert_eq!(w.check(2 * S, 3), Err(Some(MIN - 2 * S)));
    // 8 needs the 5 at 1 s gone as well.
    assert_eq!(w.check(2 * S, 8), Err(Some(MIN + S - 2 * S)));
    take_ok(&mut w, 2 * S, 1);
    take_ok(&mut w, 2 * S, 0);
    assert_eq!(w.available(2 * S), 0.0);
}

#[test]
fn same_nanosecond_takes_share_an_entry() {
    let mut w = exact(10, MIN);
    for _ in 0..5 {
        take_ok(&mut w, 7, 1);
    }
    let State::Exact(log) = &w.state else {
        panic!()
    };
    assert_eq!(log.entries, [(7, 5)]);
}

#[test]
fn refund_returns_to_the_take_it_came_from() {
    let mut w = exact(10, MIN);
    let first = take_ok(&mut w, 0, 5);
    take_ok(&mut w, 10 * S, 5);
    w.refund(20 * S, first, 3);
    assert_eq!(w.available(20 * S), 3.0);
    take_ok(&mut w, 20 * S, 3);
    // Once the first take (now 2) has left, the 5 and 3 remain; had the
    // refund gone to the newest entry, 5 would be free here.
    assert_eq!(w.available(MIN), 2.0);
}

#[test]
fn refund_after_the_take_left_the_window_does_nothing() {
    let mut w = exact(10, MIN);
    let first = take_ok(&mut w, 0, 5);
    take_ok(&mut w, 30 * S, 5);
    w.refund(MIN, first, 5);
    assert_eq!(w.available(MIN), 5.0);
    w.refund(MIN, 12345, 5);
    assert_eq!(w.available(MIN), 5.0, "no take at that stamp");
}

#[test]
fn refund_never_goes_below_zero() {
    let mut w = exact(10, MIN);
    let s = take_ok(&mut w, 0, 4);
    take_ok(&mut w, 1, 4);
    w.refund(2, s, 100);
    assert_eq!(w.available(2), 6.0, "only the 4 of that take come back");
    w.refund(2, s, 1);
    assert_eq!(w.available(2), 6.0);
}

#[test]
fn debit_is_debt_until_it_leaves_the_window() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 0, 10);
    w.debit(10 * S, 5);
    assert_eq!(w.available(10 * S), -5.0);
    assert_eq!(w.check(10 * S, 1), Err(Some(50 * S)));
    assert_eq!(w.available(MIN), 5.0);
    assert_eq!(w.check(MIN, 6), Err(Some(10 * S)));
    assert!(w.check(MIN + 10 * S, 10).is_ok());
}

#[test]
fn debt_stops_at_one_window() {
    let mut w = exact(4, MIN);
    for i in 0..1_000 {
        w.debit(i, 1);
    }
    let State::Exact(log) = &w.state else {
        panic!()
    };
    // Twice the capacity held, no more: one window of debt.
    assert_eq!((log.entries.len(), log.total), (8, 8));
    assert_eq!(w.available(999), -4.0);
    assert_eq!(w.check(MIN + 3, 1), Err(Some(1)));
    assert!(w.check(MIN + 7, 4).is_ok());
    w.forgive_debt(999);
    assert_eq!(w.available(999), 0.0);
    let mut big = SlidingWindow::new(
        &Limit::new(1_000, Duration::from_nanos(MIN)).algorithm(crate::Algorithm::SlidingWindow),
        0,
    );
    big.debit(0, u64::MAX);
    assert_eq!(big.available(0), -1_000.0);
    big.forgive_debt(0);
    assert_eq!(big.available(0), 0.0);
}

#[test]
fn clamp_records_what_upstream_says_is_gone() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 0, 2);
    w.clamp_available(S, 3);
    assert_eq!(w.available(S), 3.0);
    w.clamp_available(S, 9);
    assert_eq!(w.available(S), 3.0, "a clamp never adds");
    assert_eq!(w.check(S, 4), Err(Some(MIN - S)));
    assert_eq!(
        w.check(MIN, 6),
        Err(Some(S)),
        "the clamp leaves like a take"
    );
    assert_eq!(w.check(MIN + S, 10), Ok(()));
}

#[test]
fn cost_above_capacity_estimates_whole_windows() {
    let mut w = exact(10, MIN);
    assert_eq!(w.check(0, 25), Err(Some(2 * MIN)));
    assert_eq!(w.check(0, 20), Err(Some(MIN)));
    take_ok(&mut w, 0, 10);
    assert_eq!(w.check(S, 25), Err(Some(2 * MIN + MIN - S)));
    let mut big = exact(2_000, MIN);
    assert_eq!(big.check(0, 4_001), Err(Some(2 * MIN)));
}

#[test]
fn late_takes_stay_in_time_order() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 10, 1);
    take_ok(&mut w, 5, 1);
    take_ok(&mut w, 10, 1);
    let State::Exact(log) = &w.state else {
        panic!()
    };
    assert_eq!(log.entries, [(5, 1), (10, 2)]);
}

#[test]
fn check_about_the_future_forgets_nothing() {
    let mut w = exact(2, MIN);
    take_ok(&mut w, 0, 2);
    assert!(w.check(2 * MIN, 2).is_ok());
    assert_eq!(w.check(S, 1), Err(Some(MIN - S)));
    let mut e = exact(2_000, MIN);
    take_ok(&mut e, 0, 2_000);
    assert!(e.check(3 * MIN, 2_000).is_ok());
    assert!(e.check(S, 1).is_err());
}

#[test]
fn estimate_weights_the_previous_window() {
    let mut w = exact(2_000, MIN);
    take_ok(&mut w, 0, 2_000);
    // The same fixed window: wait for the next, then until the previous
    // window's weight leaves room for one: ⌈2000·(60 s − e)/60 s⌉ ≤ 1999.
    assert_eq!(w.check(30 * S, 1), Err(Some(30 * S + 30_000_000)));
    assert!(w.check(MIN + 30_000_000 - 1, 1).is_err());
    assert!(w.check(MIN + 30_000_000, 1).is_ok());
    // Half-way through the next window, half of the previous counts.
    assert_eq!(w.available(MIN + 30 * S), 1_000.0);
    take_ok(&mut w, MIN + 30 * S, 1_000);
    assert_eq!(w.check(MIN + 30 * S, 1), Err(Some(30_000_000)));
}

#[test]
fn estimate_refund_debit_clamp() {
    let mut w = exact(2_000, MIN);
    let old = take_ok(&mut w, S, 1_000);
    let new = take_ok(&mut w, MIN + S, 500);
    w.refund(MIN + 2 * S, old, 400);
    let State::Estimate(c) = &w.state else {
        panic!()
    };
    assert_eq!((c.previous, c.current), (600, 500));
    w.refund(MIN + 2 * S, new, 600);
    let State::Estimate(c) = &w.state else {
        panic!()
    };
    assert_eq!((c.previous, c.current), (600, 0), "never below zero");
    w.refund(2 * MIN + 2 * S, old, 600);
    let State::Estimate(c) = &w.state else {
        panic!()
    };
    assert_eq!((c.previous, c.current), (0, 0), "the old window has gone");
    w.debit(2 * MIN + 2 * S, 2_500);
    assert_eq!(w.available(2 * MIN + 2 * S), -500.0);
    // Next window: ⌈2500·overlap/60 s⌉ ≤ 1999 once overlap ≤ 47.976 s.
    assert_eq!(w.check(3 * MIN, 1), Err(Some(12_024_000_000)));
    let mut w = exact(2_000, MIN);
    take_ok(&mut w, 0, 1_000);
    w.clamp_available(MIN + MIN / 3, 100);
    assert!(w.available(MIN + MIN / 3) <= 100.0);
    assert!(w.available(MIN + MIN / 3) > 99.0);
}

#[test]
fn reconfigure_exact_to_estimate_and_back() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 30 * S, 6);
    take_ok(&mut w, MIN + S, 3);
    let big = Limit::sliding_window(3_000, Duration::from_secs(60));
    w.reconfigure(&big, MIN + 2 * S);
    let State::Estimate(c) = &w.state else {
        panic!()
    };
    assert_eq!((c.start, c.previous, c.current), (MIN, 6, 3));
    take_ok(&mut w, MIN + 30 * S, 2_000);
    // Back below EXACT_WINDOW_MAX: what the estimate holds now, taken now.
    w.reconfigure(
        &Limit::sliding_window(1_000, Duration::from_secs(60)),
        MIN + 30 * S,
    );
    let State::Exact(log) = &w.state else {
        panic!()
    };
    assert_eq!(log.entries, [(MIN + 30 * S, 2_006)]);
    assert_eq!(w.check(MIN + 30 * S, 1), Err(Some(MIN)));
    assert!(w.is_idle(2 * MIN + 30 * S));
}

#[test]
fn reconfigure_keeps_the_history() {
    let mut w = exact(10, MIN);
    take_ok(&mut w, 0, 5);
    take_ok(&mut w, 20 * S, 5);
    // A shorter window lets the oldest take go sooner.
    w.reconfigure(&Limit::sliding_window(10, Duration::from_secs(30)), 25 * S);
    assert_eq!(w.check(25 * S, 6), Err(Some(25 * S)));
    assert_eq!(w.available(30 * S), 5.0);
    // A smaller capacity: the same history leaves less.
    w.reconfigure(&Limit::sliding_window(6, Duration::from_secs(30)), 30 * S);
    assert_eq!(w.available(30 * S), 1.0);
    // Estimate to estimate under a new window: the held count, now.
    let mut e = exact(2_000, MIN);
    take_ok(&mut e, 0, 1_500);
    e.reconfigure(
        &Limit::sliding_window(2_000, Duration::from_secs(10)),
        5 * S,
    );
    assert_eq!(e.available(5 * S), 500.0);
    assert_eq!(e.available(10 * S), 2_000.0 - 1_500.0);
    assert_eq!(e.available(15 * S), 2_000.0 - 750.0);
}

#[test]
fn idle_when_nothing_is_left_in_the_window() {
    let mut w = exact(10, MIN);
    assert!(w.is_idle(0));
    take_ok(&mut w, S, 1);
    assert!(!w.is_idle(MIN));
    assert!(w.is_idle(MIN + S));
    let State::Exact(log) = &w.state else {
        panic!()
    };
    assert_eq!(log.entries.capacity(), 0, "memory given back");
    let mut e = exact(2_000, MIN);
    assert!(e.is_idle(0));
    take_ok(&mut e, S, 1);
    assert!(!e.is_idle(MIN + S), "still weighted in the next window");
    assert!(e.is_idle(2 * MIN));
    let s = take_ok(&mut e, 2 * MIN, 3);
    e.refund(2 * MIN, s, 3);
    assert!(e.is_idle(2 * MIN), "a full refund leaves nothing");
}

#[test]
fn struct_is_small() {
    assert!(std::mem::size_of::<SlidingWindow>() <= 64);
}
