//! The largest limits a limiter accepts work, and anything larger is
//! refused with an error naming it: no arithmetic overflow (found by the
//! gateway's hostile-input test: `PUT /v1/limits/{resource}` with a huge
//! capacity and window panicked the token bucket).

use std::time::Duration;

use sluice_limit::{Algorithm, Error, Limit, Limiter, MAX_CAPACITY, MAX_WINDOW, Rules};

#[test]
fn the_largest_limits_work_for_every_algorithm() {
    let limiter = Limiter::new(Rules::new()).unwrap();
    for (i, algorithm) in [
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::SlidingWindow,
        Algorithm::InFlight,
    ]
    .into_iter()
    .enumerate()
    {
        for window in [Duration::from_nanos(1), Duration::from_secs(1), MAX_WINDOW] {
            let name = format!("r{i}-{}", window.as_nanos());
            let limit = Limit::new(MAX_CAPACITY, window)
                .algorithm(algorithm)
                .burst(MAX_CAPACITY);
            limiter.set_limit(&name, limit).unwrap();
            // The whole burst at once, then whatever the refill allows.
            let grant = limiter.try_acquire(&name, MAX_CAPACITY).unwrap();
            drop(grant);
            let _ = limiter.check(&name, MAX_CAPACITY);
            limiter.set_capacity(&name, 1, window).unwrap();
            limiter.set_capacity(&name, MAX_CAPACITY, window).unwrap();
        }
    }
}

#[test]
fn larger_limits_are_refused_by_name() {
    let limiter = Limiter::new(Rules::new()).unwrap();
    let over = MAX_CAPACITY + 1;
    let second = Duration::from_secs(1);
    for (limit, what) in [
        (Limit::new(over, second), "capacity"),
        (Limit::new(1, second).burst(over), "burst"),
        (Limit::new(u64::MAX, second).burst(u64::MAX), "capacity"),
    ] {
        match limiter.set_limit("r", limit) {
            Err(Error::InvalidCapacity { what: got, .. }) => assert_eq!(got, what),
            other => panic!("{limit:?}: {other:?}"),
        }
    }
    for window in [MAX_WINDOW + Duration::from_nanos(1), Duration::MAX] {
        assert!(matches!(
            limiter.set_capacity("r", 1, window),
            Err(Error::InvalidWindow(_))
        ));
    }
    assert!(matches!(
        limiter.set_capacity("r", u64::MAX, second),
        Err(Error::InvalidCapacity { .. })
    ));
}
