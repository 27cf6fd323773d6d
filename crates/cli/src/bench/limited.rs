//! (f) Every request the limit allows: an unlimited upstream that answers
//! at once, one model limited in the gateway to R a second (burst 10, and
//! burst 1 at the highest rate), the default jitter margin, a closed loop
//! of `--connections` far above what the limit lets through. What it
//! delivers is set against the least of R and what the same stack
//! delivered with the limit off just before (issue 41): the margin and
//! the waiting must never cost the rate.
//!
//! Beside each, the baseline: the same stack with the limit off in the
//! gateway and each connection paced on the client's side by `governor`
//! (GCRA, the same rate and burst, no margin) before it sends. What that
//! loses to the machine (a stall of the whole process longer than the
//! burst lasts lets the bucket overflow, 2 ms at 5,000/s burst 10) the
//! gateway's limiter cannot have either.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use serde::Serialize;
use sluice_gateway::config::Config;
use sluice_sim::SimConfig;

use super::closed_loop;
use super::requests::{chat, client, warm};
use super::{GatewayArgs, PROVIDER, limits_off, note};
use crate::stack::Stack;

/// (rate a second, burst) of each run, as issue 41 lists them.
const LIMITS: [(f64, u64); 5] = [
    (500.0, 10),
    (1_000.0, 10),
    (2_000.0, 10),
    (5_000.0, 10),
    (5_000.0, 1),
];

/// (f).
#[derive(Debug, Serialize)]
pub struct LimitedPart {
    pub connections: usize,
    /// The gateway's jitter margin, milliseconds.
    pub jitter_margin_ms: u64,
    pub duration_s: f64,
    pub runs: Vec<LimitedRun>,
}

/// One limit of (f).
#[derive(Debug, Serialize)]
pub struct LimitedRun {
    pub rate_per_second: f64,
    pub burst: u64,
    /// What the same stack delivered with the limit off, a second, just
    /// before.
    pub unlimited_per_second: f64,
    /// Answers a second (2xx or not).
    pub delivered_per_second: f64,
    /// Answers that were not 2xx.
    pub errors: u64,
    /// delivered ÷ min(rate, unlimited).
    pub share: f64,
    /// What the limit-off stack delivered a second with `governor` pacing
    /// each connection to the same rate and burst.
    pub governor_per_second: f64,
    /// governor_per_second ÷ min(rate, unlimited).
    pub governor_share: f64,
}

/// Runs (f): for each of [`LIMITS`], the stack with the limit off, then
/// with the limit; each limit's share is set against the limit-off run
/// just before it, since other load on the machine moves both.
pub(super) async fn run(args: &GatewayArgs) -> Result<LimitedPart, String> {
    let each = (args.duration / 2).max(Duration::from_secs(1));
    let mut runs = Vec::new();
    for (rate, burst) in LIMITS {
        let burst = args.limited_burst.unwrap_or(burst);
        note(
            args.json,
            &format!(
                "(f) {} connections for {:.1} s, limit off, then {PROVIDER}/ limited to {rate}/s burst {burst}",
                args.connections,
                each.as_secs_f64()
            ),
        );
        let unlimited = measure(args, each, Limit::Off).await?;
        let t = measure(args, each, Limit::Gateway(rate, burst)).await?;
        let paced = measure(args, each, Limit::Governor(rate, burst)).await?;
        let floor = rate.min(unlimited.requests_per_second);
        runs.push(LimitedRun {
            rate_per_second: rate,
            burst,
            unlimited_per_second: unlimited.requests_per_second,
            delivered_per_second: t.requests_per_second,
            errors: t.errors,
            share: t.requests_per_second / floor,
            governor_per_second: paced.requests_per_second,
            governor_share: paced.requests_per_second / floor,
        });
    }
    Ok(LimitedPart {
        connections: args.connections,
        jitter_margin_ms: args
            .jitter_margin_ms
            .unwrap_or(Config::default().adaptive.jitter_margin_ms),
        duration_s: each.as_secs_f64(),
        runs,
    })
}

/// Where the limit of one measurement is: (rate a second, burst).
#[derive(Clone, Copy)]
enum Limit {
    Off,
    /// The gateway's, on the model.
    Gateway(f64, u64),
    /// `governor`'s, on each connection before it sends; the gateway's off.
    Governor(f64, u64),
}

/// A fresh stack, its model limited as `limit` says, saturated by a
/// closed loop for `each`.
async fn measure(
    args: &GatewayArgs,
    each: Duration,
    limit: Limit,
) -> Result<closed_loop::Throughput, String> {
    let stack = Stack::start(SimConfig::unlimited(), |c: &mut Config| {
        limits_off(c);
        if let Some(ms) = args.jitter_margin_ms {
            c.adaptive.jitter_margin_ms = ms;
            c.adaptive.max_jitter_margin_ms = c.adaptive.max_jitter_margin_ms.max(ms);
        }
        if let Limit::Gateway(rate, burst) = limit {
            let prefix = format!("{PROVIDER}/");
            for m in c.models.iter_mut().filter(|m| m.prefix == prefix) {
                m.requests_per_second = rate;
                m.burst = burst;
            }
        }
    })
    .await?;
    let gateway = stack.gateway_url();
    let client = client(args.connections);
    // Opens the connections; the limit (if any) is idle again after.
    warm(&client, &gateway, false, 10).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let make = chat(&client, &gateway, false);
    let t = match limit {
        Limit::Governor(rate, burst) => {
            closed_loop::run_gated(args.connections, each, make, governor_gate(rate, burst)?).await
        }
        _ => closed_loop::run(args.connections, each, make).await,
    };
    stack.stop().await;
    Ok(t)
}

/// Waits until one `governor` limiter of `rate` a second and `burst`
/// lets a request go (shared by every connection).
fn governor_gate(
    rate: f64,
    burst: u64,
) -> Result<
    impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static,
    String,
> {
    let per = NonZeroU32::new(rate as u32).ok_or("(f): a rate below 1/s")?;
    let burst = u32::try_from(burst)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or("(f): a burst of 0 or past u32")?;
    let limiter = Arc::new(RateLimiter::direct(
        Quota::per_second(per).allow_burst(burst),
    ));
    let clock = DefaultClock::default();
    Ok(move || {
        let (limiter, clock) = (limiter.clone(), clock.clone());
        Box::pin(async move {
            while let Err(later) = limiter.check() {
                tokio::time::sleep(later.wait_time_from(clock.now())).await;
            }
        }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
    })
}

impl LimitedPart {
    /// (f) as a table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "(f) one model limited, unlimited 0 ms upstream, {} ms jitter margin, {} connections, {:.1} s each\n    \
             {:<22} {:>12} {:>12} {:>8} {:>7} {:>12} {:>8}\n",
            self.jitter_margin_ms,
            self.connections,
            self.duration_s,
            "limit",
            "limit off/s",
            "delivered/s",
            "share",
            "errors",
            "governor/s",
            "share"
        );
        for r in &self.runs {
            s.push_str(&format!(
                "    {:<22} {:>12.1} {:>12.1} {:>7.1}% {:>7} {:>12.1} {:>7.1}%\n",
                format!("{}/s burst {}", r.rate_per_second, r.burst),
                r.unlimited_per_second,
                r.delivered_per_second,
                r.share * 100.0,
                r.errors,
                r.governor_per_second,
                r.governor_share * 100.0
            ));
        }
        s
    }
}
