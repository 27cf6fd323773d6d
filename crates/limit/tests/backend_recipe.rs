//! The limiter-backend recipe of docs/architecture.md: the example backend
//! (`examples/fixed_window.rs`) behind `Arc<dyn RateLimiter>`, held to what
//! the gateway relies on: all or nothing, waits until a deadline, refusals
//! that say how long, a 429 that pauses, unknown resources named.

#[path = "../examples/fixed_window.rs"]
mod fixed_window;

use std::sync::Arc;
use std::time::Duration;

use fixed_window::FixedWindow;
use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{Error, Limit, RateLimiter};
use tokio::time::Instant;

fn limiter() -> Arc<dyn RateLimiter> {
    let l: Arc<dyn RateLimiter> = Arc::new(FixedWindow::default());
    l.set_limit("a", Limit::new(2, Duration::from_secs(1)))
        .unwrap();
    l.set_limit("b", Limit::new(1, Duration::from_secs(1)))
        .unwrap();
    l
}

#[tokio::test(start_paused = true)]
async fn all_or_nothing_and_refusals_say_how_long() {
    let l = limiter();
    let _one = l.try_acquire_many(&[("a", 1), ("b", 1)]).await.unwrap();
    // `b` is spent: nothing of `a` is taken by a refused pair.
    match l.try_acquire_many(&[("a", 1), ("b", 1)]).await {
        Err(Error::RateLimited {
            resource,
            retry_after,
        }) => {
            assert_eq!(resource, "b");
            assert_eq!(retry_after, Some(Duration::from_secs(1)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l.get_capacity("a").await.unwrap().available, 1.0);
    assert!(matches!(
        l.try_acquire_many(&[("nope", 1)]).await,
        Err(Error::UnknownResource(r)) if r == "nope"
    ));
    assert!(matches!(
        l.try_acquire_many(&[("a", 3)]).await,
        Err(Error::InsufficientCapacity { capacity: 2, .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_for_the_next_window_within_its_deadline() {
    let l = limiter();
    let started = Instant::now();
    for _ in 0..2 {
        drop(l.acquire_many(&[("a", 1)], None).await.unwrap());
    }
    assert_eq!(Instant::now(), started, "the first two at once");
    let deadline = Some(started + Duration::from_millis(500));
    assert!(matches!(
        l.acquire_many(&[("a", 1)], deadline).await,
        Err(Error::DeadlinePassed { .. })
    ));
    drop(l.acquire_many(&[("a", 1)], None).await.unwrap());
    assert_eq!(Instant::now() - started, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn an_upstream_429_pauses_the_resource() {
    let l = limiter();
    let headers = RateLimitHeaders {
        retry_after: Some(Duration::from_secs(3)),
        ..RateLimitHeaders::default()
    };
    l.observe(None, Some("a"), None, 429, &headers)
        .await
        .unwrap();
    let c = l.get_capacity("a").await.unwrap();
    assert_eq!(c.paused_for, Some(Duration::from_secs(3)));
    let started = Instant::now();
    drop(l.acquire_many(&[("a", 1)], None).await.unwrap());
    assert_eq!(Instant::now() - started, Duration::from_secs(3));
    assert!(l.remove_idle("a"));
    assert!(!l.contains("a"));
}
