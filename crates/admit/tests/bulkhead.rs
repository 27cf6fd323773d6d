//! Bulkheads: pools that do not starve each other.

mod support;

use std::pin::pin;
use std::time::Duration;

use sluice_admit::{Bulkhead, Bulkheads, Error, PoolConfig};
use support::poll_once;
use tokio::time::{Instant, advance};

fn in_secs(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

#[tokio::test(start_paused = true)]
async fn a_saturated_model_pool_does_not_delay_api_calls() {
    let pools = Bulkheads::new([
        ("model".to_owned(), PoolConfig::new(2, 10)),
        ("api".to_owned(), PoolConfig::new(2, 10)),
    ]);
    // Slow model calls take every model slot and fill part of its line.
    let mut model_calls = Vec::new();
    for _ in 0..5 {
        let pools = pools.clone();
        model_calls.push(tokio::spawn(async move {
            let _slot = pools.acquire("model", in_secs(600)).await.unwrap();
            tokio::time::sleep(Duration::from_secs(120)).await;
        }));
    }
    support::settle().await;
    let model = pools.get("model").stats();
    assert_eq!((model.in_use, model.waiting), (2, 3));

    let start = Instant::now();
    let mut api = pin!(pools.acquire("api", in_secs(1)));
    let slot = match poll_once(api.as_mut()) {
        std::task::Poll::Ready(Ok(slot)) => slot,
        other => panic!("api call waited behind model calls: {other:?}"),
    };
    assert_eq!(slot.pool(), "api");
    assert_eq!(Instant::now(), start);
    drop(slot);

    for call in model_calls {
        call.await.unwrap();
    }
    assert_eq!(pools.get("model").stats().in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_waiting_line_is_refused() {
    let pool = Bulkhead::new("model", PoolConfig::new(1, 1));
    let held = pool.acquire(in_secs(10)).await.unwrap();
    let mut waiter = pin!(pool.acquire(in_secs(10)));
    assert!(poll_once(waiter.as_mut()).is_pending());
    let refused = pool.acquire(in_secs(10)).await.unwrap_err();
    assert_eq!(
        refused,
        Error::BulkheadFull {
            pool: "model".into()
        }
    );
    assert_eq!(pool.stats().rejected, 1);

    drop(held);
    assert!(matches!(
        poll_once(waiter.as_mut()),
        std::task::Poll::Ready(Ok(_))
    ));
    assert_eq!(pool.stats().waiting, 0);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_never_waits() {
    let pool = Bulkhead::new("api", PoolConfig::new(1, 5));
    let held = pool.try_acquire().unwrap();
    assert!(matches!(
        pool.try_acquire(),
        Err(Error::BulkheadFull { .. })
    ));
    drop(held);
    assert!(pool.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn waiting_ends_at_the_deadline_and_leaves_the_line() {
    let pool = Bulkhead::new("api", PoolConfig::new(1, 4));
    let _held = pool.acquire(in_secs(10)).await.unwrap();
    let mut waiter = pin!(pool.acquire(in_secs(2)));
    assert!(poll_once(waiter.as_mut()).is_pending());
    assert_eq!(pool.stats().waiting, 1);
    advance(Duration::from_millis(1_999)).await;
    assert!(poll_once(waiter.as_mut()).is_pending());
    advance(Duration::from_millis(1)).await;
    assert!(matches!(
        poll_once(waiter.as_mut()),
        std::task::Poll::Ready(Err(Error::DeadlineExceeded))
    ));
    let stats = pool.stats();
    assert_eq!((stats.waiting, stats.expired, stats.in_use), (0, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_leaves_the_line_and_permits_release_on_drop() {
    let pool = Bulkhead::new("default", PoolConfig::new(1, 1));
    let held = pool.acquire(in_secs(10)).await.unwrap();
    let mut waiter = Box::pin(pool.acquire(in_secs(10)));
    assert!(poll_once(waiter.as_mut()).is_pending());
    drop(waiter);
    assert_eq!(pool.stats().waiting, 0);
    drop(held);
    assert_eq!(pool.stats().in_use, 0);
    let _again = pool.try_acquire().unwrap();
}

#[tokio::test(start_paused = true)]
async fn closing_wakes_waiters() {
    let pools = Bulkheads::default();
    let model = pools.get("model");
    let _slots: Vec<_> = (0..64).map(|_| model.try_acquire().unwrap()).collect();
    let mut waiter = pin!(model.acquire(in_secs(10)));
    assert!(poll_once(waiter.as_mut()).is_pending());
    pools.close();
    assert!(matches!(
        poll_once(waiter.as_mut()),
        std::task::Poll::Ready(Err(Error::Closed))
    ));
    assert_eq!(
        pools.acquire("api", in_secs(1)).await.unwrap_err(),
        Error::Closed
    );
}
