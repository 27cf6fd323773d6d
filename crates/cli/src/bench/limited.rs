//! (f) Every request the limit allows: an unlimited upstream that answers
//! at once, one model limited in the gateway to R a second (burst 10, and
//! burst 1 at the highest rate), the default jitter margin, a closed loop
//! of `--connections` far above what the limit lets through. What it
//! delivers is set against the least of R and what the same stack
//! delivered with the limit off just before (issue 41): the margin and
//! the waiting must never cost the rate.

use std::time::Duration;

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
        let unlimited = measure(args, each, None).await?;
        let t = measure(args, each, Some((rate, burst))).await?;
        runs.push(LimitedRun {
            rate_per_second: rate,
            burst,
            unlimited_per_second: unlimited.requests_per_second,
            delivered_per_second: t.requests_per_second,
            errors: t.errors,
            share: t.requests_per_second / rate.min(unlimited.requests_per_second),
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

/// A fresh stack, its model limited to `limit` (or not), saturated by a
/// closed loop for `each`.
async fn measure(
    args: &GatewayArgs,
    each: Duration,
    limit: Option<(f64, u64)>,
) -> Result<closed_loop::Throughput, String> {
    let stack = Stack::start(SimConfig::unlimited(), |c: &mut Config| {
        limits_off(c);
        if let Some(ms) = args.jitter_margin_ms {
            c.adaptive.jitter_margin_ms = ms;
            c.adaptive.max_jitter_margin_ms = c.adaptive.max_jitter_margin_ms.max(ms);
        }
        if let Some((rate, burst)) = limit {
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
    let t = closed_loop::run(args.connections, each, chat(&client, &gateway, false)).await;
    stack.stop().await;
    Ok(t)
}

impl LimitedPart {
    /// (f) as a table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "(f) one model limited, unlimited 0 ms upstream, {} ms jitter margin, {} connections, {:.1} s each\n    \
             {:<22} {:>12} {:>12} {:>8} {:>7}\n",
            self.jitter_margin_ms,
            self.connections,
            self.duration_s,
            "limit",
            "limit off/s",
            "delivered/s",
            "share",
            "errors"
        );
        for r in &self.runs {
            s.push_str(&format!(
                "    {:<22} {:>12.1} {:>12.1} {:>7.1}% {:>7}\n",
                format!("{}/s burst {}", r.rate_per_second, r.burst),
                r.unlimited_per_second,
                r.delivered_per_second,
                r.share * 100.0,
                r.errors
            ));
        }
        s
    }
}
