//! The most requests a second a target answers: a fixed number of
//! connections, each sending its next request as soon as the last one is
//! answered, for a while.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::open_loop::send;
use super::report::Cpu;

/// What the connections achieved.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Throughput {
    /// Answers a second, 2xx or not.
    pub requests_per_second: f64,
    /// Answers in all.
    pub answered: u64,
    /// Of which not 2xx (or failed in transport).
    pub errors: u64,
}

/// Runs `connections` loops of `make()` for `duration` (after a short
/// warm-up that opens the connections).
pub async fn run<F>(connections: usize, duration: Duration, make: F) -> Throughput
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    run_with_cpu(connections, duration, make, || []).await.0
}

/// [`run`], and the CPU times `cpu` reads (the in-process gateway's,
/// [`crate::stack::gateway_cpu`], with its writers' or not, or the bare
/// hop's) over the requests answered: read when the counting begins and
/// when it ends, so that neither the warm-up nor the requests still
/// under way at the end count (`None` where the kernel does not say).
pub async fn run_with_cpu<F, const N: usize>(
    connections: usize,
    duration: Duration,
    make: F,
    cpu: fn() -> [Option<Duration>; N],
) -> (Throughput, [Option<Cpu>; N])
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    drive(connections, duration, make, || std::future::ready(()), cpu).await
}

/// [`run`], each loop waiting for `gate()` before each request: a limiter
/// on the client's side (the baseline of (f)).
pub async fn run_gated<F, G, Fut>(
    connections: usize,
    duration: Duration,
    make: F,
    gate: G,
) -> Throughput
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
    G: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    drive(connections, duration, make, gate, || []).await.0
}

async fn drive<F, G, Fut, const N: usize>(
    connections: usize,
    duration: Duration,
    make: F,
    gate: G,
    cpu: fn() -> [Option<Duration>; N],
) -> (Throughput, [Option<Cpu>; N])
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
    G: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let make = Arc::new(make);
    let gate = Arc::new(gate);
    let answered = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let warm_until = Instant::now() + Duration::from_millis(300);
    let ends = warm_until + duration;
    let mut loops = JoinSet::new();
    for _ in 0..connections {
        let (make, gate, answered, errors) = (
            Arc::clone(&make),
            Arc::clone(&gate),
            Arc::clone(&answered),
            Arc::clone(&errors),
        );
        loops.spawn(async move {
            loop {
                gate().await;
                let ok = send(make()).await;
                let now = Instant::now();
                if now >= ends {
                    break;
                }
                if now >= warm_until {
                    answered.fetch_add(1, Ordering::Relaxed);
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    tokio::time::sleep_until(warm_until).await;
    let before = cpu();
    tokio::time::sleep_until(ends).await;
    let (after, in_window) = (cpu(), answered.load(Ordering::Relaxed));
    while loops.join_next().await.is_some() {}
    let answered = answered.load(Ordering::Relaxed);
    let throughput = Throughput {
        requests_per_second: answered as f64 / duration.as_secs_f64(),
        answered,
        errors: errors.load(Ordering::Relaxed),
    };
    let spent = std::array::from_fn(|i| Cpu::over(before[i], after[i], in_window));
    (throughput, spent)
}
