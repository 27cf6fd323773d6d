use std::time::Duration;

use sluice_limit::{Limit, Limiter, Rules, SharedLimiter};

use super::*;

fn candidate(index: usize, wait_ms: u64, load: f64, weight: u32) -> Candidate {
    Candidate {
        index,
        wait: Duration::from_millis(wait_ms),
        probe: false,
        load,
        weight,
    }
}

#[test]
fn fill_takes_the_soonest_then_the_least_loaded_for_its_weight() {
    let soonest = [candidate(0, 40, 0.0, 1), candidate(1, 10, 3.0, 1)];
    assert_eq!(pick(Strategy::Fill, &soonest).index, 1);
    let loaded = [candidate(0, 0, 2.0, 1), candidate(1, 0, 1.0, 1)];
    assert_eq!(pick(Strategy::Fill, &loaded).index, 1);
    // A due probe goes first, whatever the waits.
    let mut probing = [candidate(0, 0, 0.0, 1), candidate(1, 500, 0.0, 1)];
    probing[1].probe = true;
    assert_eq!(pick(Strategy::Fill, &probing).index, 1);
}

#[test]
fn fill_draws_by_weight_among_equals() {
    let equal = [candidate(0, 0, 0.0, 1), candidate(1, 0, 0.0, 3)];
    let mut to_second = 0;
    fastrand::seed(7);
    for _ in 0..4_000 {
        to_second += usize::from(pick(Strategy::Fill, &equal).index == 1);
    }
    // Three quarters, within a wide margin of the draw's spread.
    assert!((2_800..=3_200).contains(&to_second), "{to_second}");
}

#[test]
fn ordered_takes_the_first_that_can_take_it_now_else_the_soonest() {
    let first_free = [candidate(0, 0, 9.0, 1), candidate(1, 0, 0.0, 1)];
    assert_eq!(pick(Strategy::Ordered, &first_free).index, 0);
    let overflow = [candidate(0, 30, 0.0, 1), candidate(1, 0, 5.0, 1)];
    assert_eq!(pick(Strategy::Ordered, &overflow).index, 1);
    let both_busy = [candidate(0, 30, 0.0, 1), candidate(1, 20, 0.0, 1)];
    assert_eq!(pick(Strategy::Ordered, &both_busy).index, 1);
}

#[tokio::test(start_paused = true)]
async fn the_wait_is_the_limiters_refill_for_the_calls_queued_and_this_one() {
    let limiter = Limiter::new(Rules::new().exact("d", Limit::per_second(10).burst(2))).unwrap();
    let shared = SharedLimiter::from(&limiter);
    assert_eq!(wait_of(&limiter.get_capacity("d").unwrap()), Duration::ZERO);
    let a = shared.try_acquire_many(&[("d", 1)]).await.unwrap();
    let b = shared.try_acquire_many(&[("d", 1)]).await.unwrap();
    let wait = wait_of(&limiter.get_capacity("d").unwrap());
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(wait_of(&limiter.get_capacity("d").unwrap()), Duration::ZERO);
    drop((a, b));
}
