//! What taking a job's rate through a [`SharedLimiter`] (the
//! `RateLimiter` trait object the pool holds) costs over calling the in-process
//! `Limiter` directly: the same take-and-release, side by side in one run.
//!
//! `cargo run --release -p sluice-jobs --example limits_overhead [ops]`

use std::time::{Duration, Instant};

use sluice_limit::{Limit, Limiter, Rules, SharedLimiter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ops: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    rt.block_on(async {
        // Never binding: what is measured is the call, not waiting.
        let limit = Limit::per_second(u64::from(u32::MAX)).burst(u64::from(u32::MAX));
        let limiter = Limiter::new(Rules::new().exact("jobs:q", limit))?;
        let shared = SharedLimiter::from(&limiter);
        let needs = [("jobs:q", 1)];
        for round in 0..3 {
            let t = Instant::now();
            for _ in 0..ops {
                drop(limiter.try_acquire_many(&needs)?);
            }
            let direct = t.elapsed();
            let t = Instant::now();
            for _ in 0..ops {
                drop(shared.try_acquire_many(&needs).await?);
            }
            let through = t.elapsed();
            let per = |d: Duration| d.as_nanos() as f64 / f64::from(ops);
            println!(
                "round {round}: Limiter {:.1} ns/take, SharedLimiter {:.1} ns/take (+{:.1} ns)",
                per(direct),
                per(through),
                per(through) - per(direct)
            );
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
