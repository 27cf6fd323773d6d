//! A replica that dies holding in-flight slots: they come back after the
//! lease TTL, while a live replica's slots are renewed and kept.

mod common;

use std::time::{Duration, Instant};

use common::{config, prefix, redis_url, replica};
use sluice_limit::{Limit, Rules};
use sluice_redis::Mode;

fn rules() -> Rules {
    Rules::new().exact("inflight:x", Limit::in_flight(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_slots_come_back_after_the_lease_ttl() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let mut ca = config(&url, &p, "a", Mode::Exact);
    ca.lease_ttl = Duration::from_millis(1_000);
    let mut cb = ca.clone();
    cb.replica_id = "b".into();
    let a = replica(ca, rules()).await;
    let b = replica(cb, rules()).await;

    // A live holder keeps its slot past the TTL (renewed every third).
    let live = b.try_acquire("inflight:x", 1).await.unwrap();
    // The crash: held, never released, never renewed again.
    let dead = a.try_acquire("inflight:x", 1).await.unwrap();
    std::mem::forget(dead);
    a.close();
    assert!(b.try_acquire("inflight:x", 1).await.is_err());

    let t0 = Instant::now();
    let d = tokio::time::Instant::now() + Duration::from_secs(20);
    let back = b.acquire("inflight:x", 1, Some(d)).await.unwrap();
    let after = t0.elapsed();
    println!("slot came back after {after:?} (lease TTL 1 s)");
    assert!(after >= Duration::from_millis(500), "{after:?}");
    // The live grant is still held: both slots are taken again.
    assert!(b.try_acquire("inflight:x", 1).await.is_err());
    drop((live, back));
}
