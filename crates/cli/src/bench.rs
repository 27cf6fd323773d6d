//! `sluice bench gateway`: the gateway measured as an operator would, on
//! loopback, each figure next to its baseline from the same run.
//!
//! (a) Added latency: the same fixed-rate open-loop stream of chat
//!     completions, sent straight to the sim and through the gateway,
//!     limits off; latency from each request's due time (coordinated
//!     omission corrected). Once against a sim that answers at once, at
//!     `--rate` (1,000 a second), and once at 20 a second in front of a
//!     sim that takes 20 ms, as a real provider nearby does.
//!     The gateway's CPU time ÷ requests at that rate, for the
//!     non-streamed stream and for the same stream of streamed
//!     completions (the gateway runs on threads of its own: see
//!     `stack::gateway_cpu`).
//! (b) Most requests a second with limits off, through the gateway and
//!     straight to the sim, with a fixed number of connections; through
//!     the gateway non-streamed and streamed, each with the gateway's CPU
//!     time ÷ the requests it answered, saturated: CPU per proxied
//!     request as issue 12 defines it.
//! (c) A swarm at twice one model's limit, configured alike in the sim
//!     and the gateway: goodput as a share of capacity, upstream 429s,
//!     Jain's fairness across equal-weight tenants.
//! (d) What keys, the usage ledger and budgets cost: (a)'s non-streamed
//!     stream through a gateway with no key store, no ledger and no
//!     budgets, then through one with all three, as a key of the key
//!     store whose tenant has budgets of money, tokens and requests and a
//!     per-key request limit (authentication from the cache, the per-key
//!     limit, a reserve and a settle, a ledger record per call): latency
//!     and CPU per request side by side. In-process only (it creates the
//!     tenant and key).
//! (e) OpenTelemetry export off and on: latency and CPU per request
//!     ([`otel`]); `--otel-only` runs this part alone.
//! (f) One model limited to 500 to 5,000 a second in front of an
//!     unlimited upstream: what the gateway delivers against the least
//!     of the limit and what it delivers with the limit off ([`limited`]);
//!     `--limited-only` runs this part alone.
//!
//! (a) and (b) also send a request the response cache answers (the same
//! chat completion at `temperature` 0, stored by the warm-up): a hit's
//! latency and throughput beside a proxied call to the 0 ms sim.
//!
//! With `--target URL`, (a) and (b) go through the gateway at URL instead
//! of the in-process one (the direct baseline is still the in-process
//! sim); (c) always runs in-process.

pub mod adaptive;
mod bare;
mod closed_loop;
mod gateway;
pub mod jobs;
mod keys;
mod latency;
mod limited;
mod open_loop;
mod otel;
pub mod pool;
pub mod redis;
mod report;
mod requests;
pub mod saturate;
mod slow;
mod swarm;
mod throughput;

pub(crate) use bare::THREAD_NAME as BARE_THREADS;

use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::time::Duration;

use sluice_admit::PoolConfig;
use sluice_gateway::config::{Config, RedisSettings};

use report::Report;
use requests::{chat, client};

/// What `sluice bench gateway` measures and how hard.
#[derive(Debug, Clone, clap::Args)]
pub struct GatewayArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// A running gateway for (a) and (b) instead of the in-process one,
    /// e.g. `http://127.0.0.1:8080`. It must route `openai/gpt-4o-mini`.
    #[arg(long)]
    pub target: Option<String>,
    /// Requests a second of the open-loop stream in (a).
    #[arg(long, default_value_t = 1_000.0)]
    pub rate: f64,
    /// Length of each stream in (a) and of the swarm in (c); each side of
    /// (b) runs half as long.
    #[arg(long, default_value = "10s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Connections for (b).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Run only (d), OpenTelemetry export off and on.
    #[arg(long)]
    pub otel_only: bool,
    /// Run only (f), one model limited in front of an unlimited upstream.
    #[arg(long)]
    pub limited_only: bool,
    /// Give the in-process gateways of (a) (both upstreams), (b) and (d)
    /// (both sides) `[redis]` at this URL, e.g. `redis://127.0.0.1:6379`:
    /// every request's limit decided in Redis (exact mode), to see what
    /// that adds.
    #[arg(long)]
    pub redis: Option<String>,
    /// (f): the limited model's `[adaptive] jitter_margin_ms` (the
    /// gateway's default, 20, when not given); 0 shows what the margin
    /// costs.
    #[arg(long)]
    pub jitter_margin_ms: Option<u64>,
    /// (f): every limit's burst (instead of 10, and 1 at 5,000/s): a
    /// larger one shows what is lost to the machine stalling the gateway
    /// for longer than the burst lasts.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limited_burst: Option<u64>,
}

/// The model every request of (a) and (b) names.
const PROVIDER: &str = "openai";
const MODEL: &str = "gpt-4o-mini";
/// (d): the in-process gateway's operator token, to issue the key.
const BENCH_ADMIN: &str = "sluice-bench";

pub async fn gateway(args: GatewayArgs) -> ExitCode {
    if !(args.rate > 0.0 && args.rate <= 100_000.0) {
        eprintln!("sluice bench: --rate must be above 0 and at most 100000");
        return ExitCode::from(2);
    }
    if !(1..=4_096).contains(&args.connections) {
        eprintln!("sluice bench: --connections must be 1 to 4096");
        return ExitCode::from(2);
    }
    if args.otel_only {
        return finish(args.json, otel::run(&args).await, otel::OtelPart::table);
    }
    if args.limited_only {
        return finish(
            args.json,
            limited::run(&args).await,
            limited::LimitedPart::table,
        );
    }
    finish(args.json, gateway::run(&args).await, Report::table)
}

/// Prints a bench's report (JSON or its table) or its error; the exit code.
pub(crate) fn finish<R: serde::Serialize, E: std::fmt::Display>(
    json: bool,
    out: Result<R, E>,
    table: impl FnOnce(&R) -> String,
) -> ExitCode {
    match out {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", table(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice bench: {e}");
            ExitCode::from(1)
        }
    }
}

/// Progress on stderr, unless the report is JSON.
/// A Redis key prefix of this run only: runs that share a long-lived Redis
/// never meet what an earlier run left (a cut capacity still recovering,
/// a bucket in debt, fair shares).
pub(crate) fn run_key_prefix() -> String {
    format!(
        "sluice-bench-{}-{}:",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros())
    )
}

pub(crate) fn note(json: bool, what: &str) {
    if !json {
        eprintln!("bench: {what}");
    }
}

/// [`limits_off`], with `[redis]` at `--redis` when it names one.
fn limits_off_for(args: &GatewayArgs) -> impl FnOnce(&mut Config) + '_ {
    move |config| {
        limits_off(config);
        if let Some(url) = &args.redis {
            config.redis = Some(RedisSettings::new(url.clone()));
        }
    }
}

/// Every limit, queue and pool far above the offered load: the gateway's
/// own cost, not its policy, is measured.
fn limits_off(config: &mut Config) {
    config.admin_token = Some(BENCH_ADMIN.into());
    let big = NonZeroUsize::new(100_000).expect("non-zero");
    config.queue.max_depth_per_tenant = big;
    config.queue.max_depth_total = big;
    config.queue.concurrency = NonZeroUsize::new(4_096).expect("non-zero");
    for pool in config.bulkheads.values_mut() {
        *pool = PoolConfig::new(8_192, 100_000);
    }
}
