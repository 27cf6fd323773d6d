//! `sluice bench adaptive`: the gateway against a simulated provider whose
//! limit is configured exactly, too high, changes mid-run or is not
//! configured at all; a closed-loop swarm through the in-process gateway,
//! the provider 20 ms away with network jitter. Reports goodput against
//! the provider's capacity, the upstream 429s (over the run and after the
//! warm-up the scenario allows) and fairness between tenants.

use std::time::Duration;

use serde::Serialize;
use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
use sluice_sim::{Latency, Limits, Scope, SimConfig};
use tokio::time::Instant;

use super::{finish, note};
use crate::stack::{NO_LIMIT, Stack};
use crate::summary::RunSummary;

const PROVIDER: &str = "openai";
const MODEL: &str = "gpt-4o-mini";

/// What the gateway is told against what the provider does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// The gateway has the provider's exact rate and burst.
    Exact,
    /// The gateway is told `--rate`; the provider allows 60 % of it.
    TooHigh,
    /// The provider halves its rate a third into the run and restores it
    /// two thirds in.
    LowerRestore,
    /// The provider's limit is not known: the gateway is configured with
    /// a limit that never binds (1,000,000/s, as a user who knows nothing
    /// would write) and must learn the provider's from its answers. (With
    /// no `[[models]]` entry at all the built-in default rule, 2/s, would
    /// apply and cap it: that is `defaults`.)
    Unknown,
    /// Nothing configured at all: the embedded default rule for the
    /// provider's models applies (the seed's 3/s for `openai/`, a guess)
    /// while the provider allows `--rate`. The gateway must follow the
    /// provider's announced rate above its guess.
    Defaults,
}

#[derive(Debug, Clone, clap::Args)]
pub struct AdaptiveArgs {
    /// Which scenario.
    #[arg(long, value_enum, default_value = "exact")]
    pub scenario: Scenario,
    /// The rate the gateway is configured with (and the provider's, but
    /// for `too-high`), requests per second.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// The provider's burst (and the gateway's, where configured).
    #[arg(long, default_value_t = 10)]
    pub burst: u32,
    /// How long the swarm runs.
    #[arg(long, default_value = "30s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Closed-loop agents.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// Equal-weight tenants the agents are spread over.
    #[arg(long, default_value_t = 4)]
    pub tenants: usize,
    /// Network jitter before the provider's quota check, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub jitter_ms: u64,
    /// Gateway replicas sharing the limit through Redis (1: one gateway,
    /// no Redis); the agents' calls are spread over them at random.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// The Redis the replicas share; without one, a throwaway
    /// `redis-server` from PATH.
    #[arg(long)]
    pub redis: Option<String>,
    /// With replicas: `[redis] mode`, `exact` or `leased`.
    #[arg(long, default_value = "exact")]
    pub mode: String,
    /// With replicas: each tenant's calls all go to one replica (tenant
    /// `i` to replica `i mod n`) instead of one at random.
    #[arg(long)]
    pub split_tenants: bool,
    /// The gateway's `[adaptive] jitter_margin_ms` (its default, 20, when
    /// not given): 0 shows what the margin buys.
    #[arg(long)]
    pub jitter_margin_ms: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct AdaptiveReport {
    scenario: Scenario,
    configured_per_second: Option<f64>,
    provider_per_second: f64,
    burst: u32,
    agents: usize,
    tenants: usize,
    replicas: usize,
    /// `[redis] mode` of the replicas, and whether each tenant kept to one.
    mode: String,
    split_tenants: bool,
    duration_s: f64,
    jitter_ms: u64,
    /// What the provider admitted, and what it allowed over the run.
    admitted: u64,
    capacity: f64,
    goodput: f64,
    upstream_429s: u64,
    /// 429s per request sent upstream.
    rate_429: f64,
    /// The gateway's jitter margin, milliseconds.
    jitter_margin_ms: u64,
    /// From the end of the warm-up on.
    warmup_s: f64,
    admitted_after_warmup: u64,
    capacity_after_warmup: f64,
    goodput_after_warmup: f64,
    rate_429_after_warmup: f64,
    fairness: f64,
    run: RunSummary,
}

impl AdaptiveReport {
    fn table(&self) -> String {
        format!(
            "scenario {:?}: gateway configured {}, provider {:.1}/s burst {}, {} agents in {} tenants, {} gateway(s){}, {:.0} s, {} ms jitter, {} ms margin\n  \
             goodput {:.1}% ({} of {:.0}), upstream 429s {} ({:.2}% of requests), fairness {:.4}\n  \
             after {:.0} s: goodput {:.1}% ({} of {:.0}), 429s {:.2}%\n",
            self.scenario,
            self.configured_per_second
                .map_or("nothing".to_owned(), |r| format!("{r}/s")),
            self.provider_per_second,
            self.burst,
            self.agents,
            self.tenants,
            self.replicas,
            match (self.replicas, self.split_tenants) {
                (1, _) => String::new(),
                (_, true) => format!(" ({}, tenants split)", self.mode),
                (_, false) => format!(" ({}, calls spread)", self.mode),
            },
            self.duration_s,
            self.jitter_ms,
            self.jitter_margin_ms,
            self.goodput * 100.0,
            self.admitted,
            self.capacity,
            self.upstream_429s,
            self.rate_429 * 100.0,
            self.fairness,
            self.warmup_s,
            self.goodput_after_warmup * 100.0,
            self.admitted_after_warmup,
            self.capacity_after_warmup,
            self.rate_429_after_warmup * 100.0,
        )
    }
}

/// The gateway's jitter margin when `--jitter-margin-ms` is not given.
fn margin_default() -> u64 {
    sluice_gateway::config::Config::default()
        .adaptive
        .jitter_margin_ms
}

pub async fn adaptive(args: AdaptiveArgs) -> std::process::ExitCode {
    if !(args.rate > 0.0 && args.rate <= 10_000.0) || args.burst == 0 {
        eprintln!("sluice bench adaptive: --rate must be in (0, 10000] and --burst at least 1");
        return std::process::ExitCode::from(2);
    }
    if !(1..=10_000).contains(&args.agents)
        || !(1..=100).contains(&args.tenants)
        || !(1..=16).contains(&args.replicas)
    {
        eprintln!(
            "sluice bench adaptive: --agents must be 1 to 10000, --tenants 1 to 100, --replicas 1 to 16"
        );
        return std::process::ExitCode::from(2);
    }
    // Several replicas share their limits through Redis: the one given,
    // or a throwaway one that lives as long as the run.
    let mut own_redis = None;
    let redis = match (&args.redis, args.replicas) {
        (_, 1) => None,
        (Some(url), _) => Some(url.clone()),
        (None, _) => match super::redis::OwnRedis::start() {
            Ok(r) => {
                let url = r.url();
                own_redis = Some(r);
                Some(url)
            }
            Err(e) => {
                eprintln!("sluice bench adaptive: {e} (or pass --redis URL)");
                return std::process::ExitCode::from(2);
            }
        },
    };
    let report = run(&args, redis.as_deref()).await;
    drop(own_redis);
    finish(args.json, report, AdaptiveReport::table)
}

async fn run(args: &AdaptiveArgs, redis: Option<&str>) -> Result<AdaptiveReport, String> {
    let secs = args.duration.as_secs_f64();
    let provider_rate = match args.scenario {
        Scenario::TooHigh => args.rate * 0.6,
        _ => args.rate,
    };
    let learns = matches!(args.scenario, Scenario::Unknown | Scenario::Defaults);
    let configured = (!learns).then_some(args.rate);
    let warmup = match args.scenario {
        Scenario::TooHigh => 5.0_f64,
        Scenario::Unknown | Scenario::Defaults => 10.0,
        _ => 0.0,
    }
    .min(secs / 2.0);

    let mut sim = SimConfig {
        seed: Some(7),
        ..SimConfig::default()
    };
    sim.defaults.latency = Latency {
        base_ms: 20,
        jitter_ms: args.jitter_ms,
        ..Latency::default()
    };
    let limits = Limits::per_second(provider_rate).burst(args.burst);
    if let Some(p) = sim.providers.get_mut(PROVIDER) {
        p.limits = limits;
    }
    let (rate, burst) = match configured {
        Some(r) => (r, u64::from(args.burst)),
        None => (NO_LIMIT, NO_LIMIT as u64),
    };
    let prefix = format!("{PROVIDER}/");
    // Keys of this run only, should the Redis be a long-lived one.
    let key_prefix = super::run_key_prefix();
    let embedded = sluice_gateway::config::Config::default()
        .models
        .into_iter()
        .find(|m| m.prefix == prefix);
    let tweak = |c: &mut sluice_gateway::config::Config| {
        for m in &mut c.models {
            if m.prefix == prefix {
                match (&embedded, args.scenario) {
                    (Some(rule), Scenario::Defaults) => m.clone_from(rule),
                    _ => {
                        m.requests_per_second = rate;
                        m.burst = burst;
                    }
                }
            }
        }
        if let Some(ms) = args.jitter_margin_ms {
            c.adaptive.jitter_margin_ms = ms;
            c.adaptive.max_jitter_margin_ms = c.adaptive.max_jitter_margin_ms.max(ms);
        }
        if let Some(url) = redis {
            let mut r = sluice_gateway::config::RedisSettings::new(url);
            r.prefix.clone_from(&key_prefix);
            r.mode.clone_from(&args.mode);
            c.redis = Some(r);
        }
    };
    let mut stack = Stack::start(sim, tweak).await?;
    for _ in 1..args.replicas {
        stack.add_gateway(tweak).await?;
    }
    let workload = Workload::single_model(PROVIDER, MODEL, (Duration::ZERO, Duration::ZERO));
    stack.fresh_start(workload.target_names());
    let config = SwarmConfig::new(stack.gateway_url(), Mode::Gateway, workload)
        .replicas(stack.gateway_urls().into_iter().skip(1))
        .tenant_per_replica(args.split_tenants)
        .agents(args.agents)
        .tenants(args.tenants)
        .duration(args.duration);
    note(
        args.json,
        &format!(
            "{:?}: {} agents for {secs:.0} s",
            args.scenario, args.agents
        ),
    );
    let started = Instant::now();
    let swarm = Swarm::start(config).map_err(|e| e.to_string())?;
    let count = |stats: &sluice_sim::Stats| {
        let c = stats.model(MODEL);
        (c.admitted, c.rate_limited)
    };
    let mut at_warmup = (0, 0);
    let mut capacity = f64::from(args.burst);
    let capacity_after;
    if args.scenario == Scenario::LowerRestore {
        let third = args.duration / 3;
        tokio::time::sleep_until(started + third).await;
        stack
            .sim
            .set_limits(
                Scope::Model(MODEL.to_owned()),
                Limits::per_second(provider_rate / 2.0).burst(args.burst),
            )
            .map_err(|e| e.to_string())?;
        tokio::time::sleep_until(started + third * 2).await;
        stack
            .sim
            .set_limits(Scope::Model(MODEL.to_owned()), limits)
            .map_err(|e| e.to_string())?;
        // Each change starts a full bucket.
        capacity += 2.0 * f64::from(args.burst);
        capacity += provider_rate * (secs * 2.0 / 3.0) + provider_rate / 2.0 * secs / 3.0;
        capacity_after = capacity;
    } else {
        if warmup > 0.0 {
            tokio::time::sleep_until(started + Duration::from_secs_f64(warmup)).await;
            at_warmup = count(&stack.sim.stats());
        }
        capacity += provider_rate * secs;
        capacity_after = provider_rate * (secs - warmup)
            + if warmup > 0.0 {
                0.0
            } else {
                f64::from(args.burst)
            };
    }
    let report = swarm.finish().await;
    let stats = stack.sim.stats();
    let (admitted, refused) = count(&stats);
    let run = RunSummary::new(report, &stats, &stack.sim_config, started.elapsed());
    stack.stop().await;
    let share = |a: u64, r: u64| {
        if a + r == 0 {
            0.0
        } else {
            r as f64 / (a + r) as f64
        }
    };
    let (admitted_after, refused_after) = (admitted - at_warmup.0, refused - at_warmup.1);
    Ok(AdaptiveReport {
        scenario: args.scenario,
        configured_per_second: configured,
        provider_per_second: provider_rate,
        burst: args.burst,
        agents: args.agents,
        tenants: args.tenants,
        replicas: args.replicas,
        mode: args.mode.clone(),
        split_tenants: args.split_tenants,
        duration_s: secs,
        jitter_ms: args.jitter_ms,
        admitted,
        capacity,
        goodput: admitted as f64 / capacity,
        upstream_429s: refused,
        rate_429: share(admitted, refused),
        jitter_margin_ms: args.jitter_margin_ms.unwrap_or(margin_default()),
        warmup_s: warmup,
        admitted_after_warmup: admitted_after,
        capacity_after_warmup: capacity_after,
        goodput_after_warmup: admitted_after as f64 / capacity_after.max(1.0),
        rate_429_after_warmup: share(admitted_after, refused_after),
        fairness: run.fairness,
        run,
    })
}
