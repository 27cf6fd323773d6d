//! `sluice bench pool` (and `sluice demo --scenario pool`): a capacity
//! pool — one model name over simulated deployments, each with a limit
//! of its own configured alike in the sim and the gateway — under a swarm
//! that calls it twice as often as the deployments together allow.
//!
//! Scenarios: `even` (two deployments of 25/s, burst 5), `uneven` (10/s
//! and 40/s: each should serve in proportion to its limit), `failover`
//! (two of 25/s; one answers only 503s from a third of the run to two
//! thirds: the survivor's share of its capacity from a second after the
//! failure, client errors, how soon the failed one serves again once it
//! recovers), `hang` (the same, but it stops answering: calls hang until
//! the attempt timeout, 1 s here), `replicas` (`even` through two gateways sharing the
//! deployments' limits in Redis: `--redis`), `ordered` (30/s then 30/s in
//! order, the second taking only the overflow), `keys` (one model over five
//! keys of 400/s burst 10 each, 2,000/s in all, agents calling again as
//! soon as answered).

use std::time::Duration;

use serde::Serialize;
use sluice_gateway::config::{
    Config, Deployment, ModelPool, ProviderConfig, RedisSettings, Strategy,
};
use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
use sluice_sim::{Faults, Latency, Limits, ModelConfig, Scope, SimConfig};
use tokio::time::Instant;

use crate::stack::Stack;
use crate::summary::RunSummary;
use crate::table::Table;

/// The pooled model's name, as agents call it.
const PROVIDER: &str = "openai";
const MODEL: &str = "gpt-4o-mini";
/// The agents' pause between calls, uniform (mean 1 s).
pub(crate) const THINK: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_millis(1_500));

/// `sluice bench pool`'s settings.
#[derive(Debug, Clone, clap::Args)]
pub struct PoolArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which scenario: `even`, `uneven`, `failover`, `hang`, `ordered`,
    /// `keys`, `replicas` (needs `--redis`), or `all` (all but `replicas`
    /// unless `--redis` is given).
    #[arg(long, value_enum, default_value_t = PoolScenario::All)]
    pub scenario: PoolScenario,
    /// Length of each run.
    #[arg(long, default_value = "30s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Agents; they offer about twice the pool's capacity at the default.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// Tenants, equal weight; the first runs twice the agents of each other.
    #[arg(long, default_value_t = 4)]
    pub tenants: usize,
    /// Redis for `replicas`, e.g. `redis://127.0.0.1:6379`.
    #[arg(long)]
    pub redis: Option<String>,
}

/// The scenarios of `sluice bench pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PoolScenario {
    Even,
    Uneven,
    Failover,
    Hang,
    Ordered,
    Keys,
    Replicas,
    All,
}

/// One deployment of a run: its sim model and limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dep {
    pub(crate) model: &'static str,
    pub(crate) rate: f64,
    pub(crate) burst: u32,
}

/// How a deployment fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failing {
    /// It answers 503 to every call.
    Errors,
    /// It stops answering: calls hang until the gateway's attempt
    /// timeout (1 s in this scenario).
    Hangs,
}

/// A deployment failing for part of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fail {
    /// Which deployment.
    pub(crate) index: usize,
    /// How.
    pub(crate) how: Failing,
    /// From when, and until when, after the start.
    pub(crate) from: Duration,
    pub(crate) until: Duration,
}

/// One run's setting.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    pub(crate) name: &'static str,
    pub(crate) deployments: Vec<Dep>,
    pub(crate) strategy: Strategy,
    pub(crate) agents: usize,
    pub(crate) tenants: usize,
    /// Each agent's pause between calls, uniform between the two.
    pub(crate) think: (Duration, Duration),
    pub(crate) duration: Duration,
    pub(crate) fail: Option<Fail>,
    /// The Redis the replicas share, and the key prefix of this run (see
    /// [`super::run_key_prefix`]).
    pub(crate) redis: Option<(String, String)>,
    pub(crate) replicas: usize,
}

/// One deployment's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DeploymentRun {
    pub(crate) model: String,
    pub(crate) limit_per_second: f64,
    pub(crate) burst: u32,
    /// Requests its quota admitted (answered, or failed by the fault).
    pub(crate) admitted: u64,
    /// 2xx it answered.
    pub(crate) ok: u64,
    pub(crate) per_second: f64,
    /// admitted ÷ (limit × time + burst).
    pub(crate) share_of_limit: f64,
    pub(crate) upstream_429s: u64,
    pub(crate) server_errors: u64,
}

/// What a failure and a recovery did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FailoverRun {
    pub(crate) failed: String,
    pub(crate) failed_at_s: f64,
    pub(crate) recovered_at_s: f64,
    /// The other deployments' admitted calls from a second after the
    /// failure to the recovery, ÷ their limits over that time.
    pub(crate) survivors_share_after_1s: f64,
    /// From the recovery to the failed deployment's next 2xx.
    pub(crate) back_after_s: Option<f64>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PoolRun {
    pub(crate) scenario: String,
    pub(crate) strategy: Strategy,
    pub(crate) replicas: usize,
    pub(crate) agents: usize,
    pub(crate) capacity_per_second: f64,
    pub(crate) run: RunSummary,
    pub(crate) deployments: Vec<DeploymentRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) failover: Option<FailoverRun>,
}

pub async fn pool(args: PoolArgs) -> std::process::ExitCode {
    let setups = match setups(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice bench pool: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut runs = Vec::new();
    for s in setups {
        super::note(
            args.json,
            &format!("pool: {} ({} s)", s.name, s.duration.as_secs()),
        );
        match run(&s).await {
            Ok(r) => runs.push(r),
            Err(e) => {
                eprintln!("sluice bench pool: {}: {e}", s.name);
                return std::process::ExitCode::from(1);
            }
        }
    }
    super::finish(args.json, Ok::<_, String>(runs), |runs| {
        runs.iter().map(table).collect::<Vec<_>>().join("\n")
    })
}

/// The runs `args` asks for.
fn setups(args: &PoolArgs) -> Result<Vec<Setup>, String> {
    if !(1..=10_000).contains(&args.agents) || !(1..=100).contains(&args.tenants) {
        return Err("--agents must be 1 to 10000 and --tenants 1 to 100".into());
    }
    let base = |name, deployments: Vec<Dep>| Setup {
        name,
        deployments,
        strategy: Strategy::Fill,
        agents: args.agents,
        tenants: args.tenants,
        think: THINK,
        duration: args.duration,
        fail: None,
        redis: None,
        replicas: 1,
    };
    let two = || {
        vec![
            Dep {
                model: "dep-a",
                rate: 25.0,
                burst: 5,
            },
            Dep {
                model: "dep-b",
                rate: 25.0,
                burst: 5,
            },
        ]
    };
    let even = base("even", two());
    let uneven = base(
        "uneven",
        vec![
            Dep {
                model: "dep-a",
                rate: 10.0,
                burst: 5,
            },
            Dep {
                model: "dep-b",
                rate: 40.0,
                burst: 5,
            },
        ],
    );
    let fail = |how| {
        Some(Fail {
            index: 1,
            how,
            from: args.duration / 3,
            until: args.duration * 2 / 3,
        })
    };
    let failover = Setup {
        fail: fail(Failing::Errors),
        ..base("failover", two())
    };
    let hang = Setup {
        fail: fail(Failing::Hangs),
        ..base("hang", two())
    };
    let ordered = Setup {
        strategy: Strategy::Ordered,
        ..base(
            "ordered",
            vec![
                Dep {
                    model: "dep-a",
                    rate: 30.0,
                    burst: 5,
                },
                Dep {
                    model: "dep-b",
                    rate: 30.0,
                    burst: 5,
                },
            ],
        )
    };
    // Five keys of a 24,000-RPM tier: agents that call again as soon as
    // answered offer about twice the 2,000/s (100 agents, 20 to 25 ms an
    // answer).
    let keys = Setup {
        think: (Duration::ZERO, Duration::ZERO),
        ..base(
            "keys",
            ["dep-a", "dep-b", "dep-c", "dep-d", "dep-e"]
                .into_iter()
                .map(|model| Dep {
                    model,
                    rate: 400.0,
                    burst: 10,
                })
                .collect(),
        )
    };
    let replicas = |url: &String| Setup {
        redis: Some((url.clone(), super::run_key_prefix())),
        replicas: 2,
        ..base("replicas", two())
    };
    Ok(match (args.scenario, &args.redis) {
        (PoolScenario::Even, _) => vec![even],
        (PoolScenario::Uneven, _) => vec![uneven],
        (PoolScenario::Failover, _) => vec![failover],
        (PoolScenario::Hang, _) => vec![hang],
        (PoolScenario::Ordered, _) => vec![ordered],
        (PoolScenario::Keys, _) => vec![keys],
        (PoolScenario::Replicas, Some(url)) => vec![replicas(url)],
        (PoolScenario::Replicas, None) => return Err("`replicas` needs --redis".into()),
        (PoolScenario::All, None) => vec![even, uneven, failover, hang, ordered, keys],
        (PoolScenario::All, Some(url)) => {
            vec![even, uneven, failover, hang, ordered, keys, replicas(url)]
        }
    })
}

/// The sim: each deployment a model of the `openai` provider with its own
/// limit, 20 ms away with up to 5 ms of jitter.
fn sim_config(s: &Setup) -> SimConfig {
    let mut sim = SimConfig {
        seed: Some(7),
        ..SimConfig::default()
    };
    sim.defaults.latency = Latency {
        base_ms: 20,
        jitter_ms: 5,
        ..Latency::default()
    };
    for d in &s.deployments {
        sim.models.insert(
            d.model.to_owned(),
            ModelConfig {
                provider: Some(PROVIDER.into()),
                limits: Some(Limits::per_second(d.rate).burst(d.burst)),
                ..ModelConfig::default()
            },
        );
    }
    sim
}

/// The pool in the gateway: one provider per deployment (`sim-{model}`,
/// the sim's OpenAI endpoints), each deployment limited exactly as the
/// sim limits it.
fn pooled(s: &Setup) -> impl Fn(&mut Config) + '_ {
    move |c: &mut Config| {
        let Some(openai) = c.providers.iter().find(|p| p.name == PROVIDER).cloned() else {
            return;
        };
        let mut deployments = Vec::new();
        for d in &s.deployments {
            let name = format!("sim-{}", d.model);
            c.providers.push(ProviderConfig {
                name: name.clone(),
                ..openai.clone()
            });
            deployments.push(Deployment {
                provider: name,
                model: Some(d.model.to_owned()),
                requests_per_second: d.rate,
                burst: u64::from(d.burst),
                tokens_per_minute: None,
                max_in_flight: None,
                weight: 1,
            });
        }
        c.pools.push(ModelPool {
            model: format!("{PROVIDER}/{MODEL}"),
            strategy: s.strategy,
            failures_to_open: 3,
            open_ms: 1_000,
            deployments,
        });
        if let Some((url, prefix)) = &s.redis {
            let mut r = RedisSettings::new(url.clone());
            r.prefix.clone_from(prefix);
            c.redis = Some(r);
        }
        if s.fail.is_some_and(|f| f.how == Failing::Hangs) {
            // A deployment that stops answering is found out by the
            // attempt's timeout.
            c.retry.attempt_timeout_ms = 1_000;
        }
    }
}

/// Runs `s`: the swarm through the gateway(s), the failure if any on its
/// schedule.
pub(crate) async fn run(s: &Setup) -> Result<PoolRun, String> {
    let sim = sim_config(s);
    let mut stack = Stack::start(sim, pooled(s)).await?;
    for _ in 1..s.replicas {
        stack.add_gateway(pooled(s)).await?;
    }
    let names: Vec<(&str, &str)> = s.deployments.iter().map(|d| (d.model, "model")).collect();
    stack.fresh_start(names);
    let workload = Workload::single_model(PROVIDER, MODEL, s.think);
    let config = SwarmConfig::new(stack.gateway_url(), Mode::Gateway, workload)
        .replicas(stack.gateway_urls())
        .agents(s.agents)
        .tenants(s.tenants)
        .noisy_factor(2)
        .duration(s.duration);
    let started = Instant::now();
    let swarm = Swarm::start(config).map_err(|e| e.to_string())?;
    let (report, failover) = tokio::join!(swarm.finish(), schedule(&stack, s, started));
    let elapsed = started.elapsed();
    let stats = stack.sim.stats();
    let summary = RunSummary::new(report, &stats, &stack.sim_config, elapsed);
    stack.stop().await;
    let secs = elapsed.as_secs_f64();
    let deployments = s
        .deployments
        .iter()
        .map(|d| {
            let c = stats.model(d.model);
            DeploymentRun {
                model: d.model.to_owned(),
                limit_per_second: d.rate,
                burst: d.burst,
                admitted: c.admitted,
                ok: c.ok,
                per_second: c.admitted as f64 / secs.max(1e-9),
                share_of_limit: c.admitted as f64 / (d.rate * secs + f64::from(d.burst)),
                upstream_429s: c.rate_limited,
                server_errors: c.server_errors,
            }
        })
        .collect();
    Ok(PoolRun {
        scenario: s.name.to_owned(),
        strategy: s.strategy,
        replicas: s.replicas,
        agents: s.agents,
        capacity_per_second: s.deployments.iter().map(|d| d.rate).sum(),
        run: summary,
        deployments,
        failover,
    })
}

/// The failure of `s`, if any: the deployment answers 503 from `from`
/// to `until`; what the others admitted meanwhile, and when it serves
/// again.
async fn schedule(stack: &Stack, s: &Setup, started: Instant) -> Option<FailoverRun> {
    let fail = s.fail?;
    let dead = s.deployments.get(fail.index)?;
    let survivors: Vec<&Dep> = (s.deployments.iter().enumerate())
        .filter(|(i, _)| *i != fail.index)
        .map(|(_, d)| d)
        .collect();
    let admitted = || -> u64 {
        let stats = stack.sim.stats();
        survivors
            .iter()
            .map(|d| stats.model(d.model).admitted)
            .sum()
    };
    tokio::time::sleep_until(started + fail.from).await;
    let failing = match fail.how {
        Failing::Errors => Faults {
            error_rate: 1.0,
            error_statuses: vec![503],
            ..Faults::none()
        },
        Failing::Hangs => Faults {
            hang_rate: 1.0,
            hang_ms: 30_000,
            ..Faults::none()
        },
    };
    let _ = stack
        .sim
        .set_faults(Scope::Model(dead.model.into()), failing);
    let failed_at = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (from, counted_from) = (admitted(), Instant::now());
    tokio::time::sleep_until(started + fail.until).await;
    let span = counted_from.elapsed().as_secs_f64();
    let during = admitted().saturating_sub(from);
    let rate: f64 = survivors.iter().map(|d| d.rate).sum();
    let before = stack.sim.stats().model(dead.model).ok;
    let _ = stack
        .sim
        .set_faults(Scope::Model(dead.model.into()), Faults::none());
    let recovered = Instant::now();
    let recovered_at = started.elapsed();
    let mut back_after = None;
    // Looked at every 10 ms, for at most 5 s.
    for _ in 0..500 {
        if stack.sim.stats().model(dead.model).ok > before {
            back_after = Some(recovered.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Some(FailoverRun {
        failed: dead.model.to_owned(),
        failed_at_s: failed_at.as_secs_f64(),
        recovered_at_s: recovered_at.as_secs_f64(),
        survivors_share_after_1s: during as f64 / (rate * span).max(1e-9),
        back_after_s: back_after,
    })
}

/// A run as a text table: the run's figures, then one line per
/// deployment.
pub(crate) fn table(r: &PoolRun) -> String {
    let mut out = format!(
        "pool `{PROVIDER}/{MODEL}`, scenario {}: {} deployments ({:?}), {} gateway(s), {} agents, capacity {} /s\n",
        r.scenario,
        r.deployments.len(),
        r.strategy,
        r.replicas,
        r.agents,
        r.capacity_per_second
    );
    let run = &r.run;
    let mut t = Table::new(["", "value"]).right([1]);
    t.row([
        "goodput, share of capacity".to_owned(),
        format!("{:.1}%", run.goodput.share * 100.0),
    ])
    .row([
        "  admitted / capacity".to_owned(),
        format!("{} / {:.0}", run.goodput.admitted, run.goodput.capacity),
    ])
    .row(["upstream 429s".to_owned(), run.upstream_429s.to_string()])
    .row([
        "upstream 429s, share of attempts".to_owned(),
        format!(
            "{:.3}%",
            run.upstream_429s as f64 / (run.goodput.admitted + run.upstream_429s).max(1) as f64
                * 100.0
        ),
    ])
    .row([
        format!("fairness (Jain, {} tenants)", run.tenants.len()),
        format!("{:.3}", run.fairness),
    ])
    .row(["tasks finished".to_owned(), run.calls.ok.to_string()])
    .row([
        "tasks given up (client errors)".to_owned(),
        run.calls.failed.to_string(),
    ]);
    if let Some(f) = &r.failover {
        t.row([
            format!(
                "{} failing from {:.1} s to {:.1} s",
                f.failed, f.failed_at_s, f.recovered_at_s
            ),
            String::new(),
        ])
        .row([
            "  the others' share of their limit, from 1 s after".to_owned(),
            format!("{:.1}%", f.survivors_share_after_1s * 100.0),
        ])
        .row([
            "  serving again after recovery".to_owned(),
            f.back_after_s
                .map_or("not within 5 s".to_owned(), |s| format!("{s:.2} s")),
        ]);
    }
    out.push_str(&t.render());
    let mut d = Table::new([
        "deployment",
        "limit /s",
        "admitted",
        "/s",
        "of its limit",
        "429s",
        "5xx",
    ])
    .right([1, 2, 3, 4, 5, 6]);
    for x in &r.deployments {
        d.row([
            x.model.clone(),
            format!("{}", x.limit_per_second),
            x.admitted.to_string(),
            format!("{:.1}", x.per_second),
            format!("{:.1}%", x.share_of_limit * 100.0),
            x.upstream_429s.to_string(),
            x.server_errors.to_string(),
        ]);
    }
    out.push('\n');
    out.push_str(&d.render());
    out
}
