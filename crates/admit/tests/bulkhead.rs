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

/// Issue 33: one tenant held every slot of the model pool (streams it
/// never read), and every other tenant's call waited out its deadline.
/// Now a tenant holds at most its share (half the pool by default); its
/// next call waits, another tenant's goes at once.
#[tokio::test(start_paused = true)]
async fn one_tenant_holds_at_most_its_share() {
    let pool = Bulkhead::new("model", PoolConfig::new(4, 8));
    assert_eq!(PoolConfig::new(4, 8).tenant_share(), 2);
    let a1 = pool.acquire_for(Some("a"), in_secs(60)).await.unwrap();
    let a2 = pool.acquire_for(Some("a"), in_secs(60)).await.unwrap();
    let mut a3 = pin!(pool.acquire_for(Some("a"), in_secs(60)));
    assert!(poll_once(a3.as_mut()).is_pending(), "past its share");
    assert_eq!(pool.stats().waiting, 1);
    // Another tenant finds the other half free.
    let b1 = match poll_once(pin!(pool.acquire_for(Some("b"), in_secs(60)))) {
        std::task::Poll::Ready(Ok(slot)) => slot,
        other => panic!("b waited behind a: {other:?}"),
    };
    let b2 = pool.acquire_for(Some("b"), in_secs(60)).await.unwrap();
    assert_eq!(pool.stats().in_use, 4);
    // a's waiting call goes when a gives a slot back.
    drop(a1);
    let a3 = match poll_once(a3.as_mut()) {
        std::task::Poll::Ready(Ok(slot)) => slot,
        other => panic!("{other:?}"),
    };
    assert_eq!(pool.tenants(), 2);
    drop((a3, b1, a2, b2));
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(pool.tenants(), 0, "no entry outlives its tenant's slots");
}

/// A tenant's wait past its share ends at its deadline and leaves no
/// entry behind; `None` (no tenants) has no share.
#[tokio::test(start_paused = true)]
async fn a_wait_for_a_share_ends_at_the_deadline() {
    let mut config = PoolConfig::new(3, 8);
    config.max_per_tenant = std::num::NonZeroUsize::new(1);
    assert_eq!(config.tenant_share(), 1);
    let pool = Bulkhead::new("model", config);
    let held = pool.acquire_for(Some("a"), in_secs(60)).await.unwrap();
    let waited = pool.acquire_for(Some("a"), in_secs(5)).await.unwrap_err();
    assert_eq!(waited, Error::DeadlineExceeded);
    drop(held);
    assert_eq!(pool.tenants(), 0);
    let all: Vec<_> = whole_pool(&pool).await;
    assert_eq!(all.len(), 3, "without a tenant, the whole pool");
}

async fn whole_pool(pool: &Bulkhead) -> Vec<sluice_admit::BulkheadPermit> {
    let mut all = Vec::new();
    for _ in 0..3 {
        all.push(pool.acquire_for(None, in_secs(1)).await.unwrap());
    }
    all
}

#[test]
fn max_per_tenant_is_read_from_config() {
    let c: PoolConfig =
        serde_json::from_str(r#"{"max_concurrent": 10, "max_waiting": 1, "max_per_tenant": 3}"#)
            .unwrap();
    assert_eq!(c.tenant_share(), 3);
    let c: PoolConfig = serde_json::from_str(r#"{"max_concurrent": 7, "max_waiting": 1}"#).unwrap();
    assert_eq!(c.tenant_share(), 4, "half, rounded up");
    let c: PoolConfig =
        serde_json::from_str(r#"{"max_concurrent": 2, "max_waiting": 1, "max_per_tenant": 9}"#)
            .unwrap();
    assert_eq!(c.tenant_share(), 2, "never more than the pool");
}
