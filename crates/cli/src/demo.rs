//! `sluice demo`: the same agent swarm twice against simulated providers,
//! first calling them directly with the retry loop agents typically use,
//! then through Sluice, with a live view and a side-by-side summary. The
//! agents make their tool calls over MCP: to the sim's MCP server
//! directly, then to Sluice's `/mcp` in front of it ([`ToolCalls`]).
//! `--scenario cache` shows the response cache instead ([`cache`]).

mod cache;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
use sluice_sim::{Latency, Limits, SimConfig};
use tokio::time::Instant;

use crate::args::ProviderRates;
use crate::live::{GatewayView, Live};
use crate::stack::Stack;
use crate::summary::{RunSummary, side_by_side};

/// The demo's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Simulated agents.
    #[arg(long, default_value_t = 200)]
    pub agents: usize,
    /// Tenants; the first runs twice the agents of each other (a noisy
    /// neighbour).
    #[arg(long, default_value_t = 5)]
    pub tenants: usize,
    /// Length of each of the two runs.
    #[arg(long, default_value = "25s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Print the summary as JSON on stdout (the live view goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Provider request limits, requests per second per model: `10` for
    /// all, or `openai=3,anthropic=2,google=5` (the defaults).
    #[arg(long, value_parser = crate::args::provider_rates)]
    pub provider_rps: Option<ProviderRates>,
    /// What to show: `swarm` (direct vs through Sluice) or `cache`
    /// (agents that repeat questions, with the response cache off then on).
    #[arg(long, value_enum, default_value_t = Scenario::Swarm)]
    pub scenario: Scenario,
    /// Serve the live dashboard during the run through Sluice, and print
    /// its URL and a one-time token to log in with (`sluice top` takes
    /// the same token).
    #[arg(long)]
    pub ui: bool,
}

/// A token for `--ui`'s dashboard, made for this run: 32 hex digits from
/// the OS's random source.
fn ui_token() -> Result<String, String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw)
        .map_err(|e| format!("no random source for the dashboard's token: {e}"))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// Prints where the dashboard is and how to log in.
fn announce_ui(stack: &Stack, token: &str) {
    let url = stack.gateway_url();
    eprintln!(
        "dashboard: {url}/ui  (log in with the token {token})\n\
         terminal:  sluice top --target {url} --token {token}\n"
    );
}

/// The demo's scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// The swarm, direct then through Sluice.
    Swarm,
    /// Agents repeating questions: calls and tokens the cache saves.
    Cache,
    /// One model served by three simulated deployments of different
    /// limits, one of which fails mid-run: what each served against its
    /// limit.
    Pool,
}

/// The JSON summary.
#[derive(Debug, Serialize)]
struct DemoSummary {
    agents: usize,
    tenants: usize,
    duration_s: f64,
    /// The providers' and APIs' limits, requests per second.
    limits_per_second: BTreeMap<String, f64>,
    direct: RunSummary,
    sluice: RunSummary,
    /// The agents' tool calls (over MCP) of each run.
    tool_calls: BTreeMap<&'static str, ToolCalls>,
}

/// One run's tool calls, made over MCP.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct ToolCalls {
    /// Calls that got a result.
    ok: u64,
    /// Calls given up.
    failed: u64,
    /// `tools/call`s sent, retries included.
    attempts: u64,
    /// 429s the APIs behind the tools answered (the sim's count).
    upstream_429s: u64,
    /// Mean latency of a call that got a result, retries and waits
    /// included.
    mean_ms: f64,
}

impl ToolCalls {
    fn of(targets: &[sluice_sim::swarm::TargetProgress], stats: &sluice_sim::Stats) -> Self {
        let apis = || targets.iter().filter(|t| t.kind == "api");
        let ok: u64 = apis().map(|t| t.ok).sum();
        let latency: f64 = apis().map(|t| t.latency_ms_sum).sum();
        ToolCalls {
            ok,
            failed: apis().map(|t| t.failed).sum(),
            attempts: apis().map(|t| t.attempts).sum(),
            upstream_429s: stats.apis.values().map(|c| c.rate_limited).sum(),
            mean_ms: if ok == 0 { 0.0 } else { latency / ok as f64 },
        }
    }

    fn line(&self, title: &str) -> String {
        format!(
            "  {title:<15} {:>6} ok  {:>4} failed  {:>6} sent  {:>5} upstream 429s  mean {}",
            self.ok,
            self.failed,
            self.attempts,
            self.upstream_429s,
            crate::summary::ms(self.mean_ms),
        )
    }
}

/// `[[mcp_servers]] sim`: the sim's MCP server, found at the URL the
/// gateway's APIs point at.
fn sim_mcp_server(c: &mut sluice_gateway::config::Config) {
    let sim = (c.apis.iter()).find_map(|a| {
        a.base_url
            .strip_suffix(&format!("/{}", a.name))
            .map(str::to_owned)
    });
    if let Some(sim) = sim {
        (c.mcp_servers).push(sluice_gateway::config::McpServerConfig::http(
            "sim",
            format!("{sim}/mcp"),
        ));
    }
}

/// The simulated upstreams: the seed's limits (or `--provider-rps`), and
/// latencies like real ones, scaled down: a model answers in about 0.3 s,
/// streams at 5 ms a token, an API in 50 ms; every request reaches its
/// upstream with up to 10 ms of network jitter.
fn sim_config(rates: Option<&ProviderRates>) -> SimConfig {
    let mut config = SimConfig {
        seed: Some(7),
        ..SimConfig::default()
    };
    config.defaults.latency = Latency {
        base_ms: 300,
        ttft_ms: 150,
        per_token_ms: 5,
        jitter_ms: 10,
    };
    for (name, p) in &mut config.providers {
        if let Some(rate) = rates.and_then(|r| r.of(name)) {
            p.limits = Limits::per_second(rate);
        }
    }
    for a in config.apis.values_mut() {
        a.latency_ms = 50;
        a.jitter_ms = 10;
    }
    config
}

pub async fn run(args: DemoArgs) -> ExitCode {
    let ran = match args.scenario {
        Scenario::Swarm => demo(args).await,
        Scenario::Cache => cache::demo(args).await,
        Scenario::Pool => pool(&args).await,
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice demo: {e}");
            ExitCode::from(1)
        }
    }
}

/// `--scenario pool`: `openai/gpt-4o-mini` over three simulated
/// deployments of 10, 20 and 30 requests a second; the second answers
/// only 503s from a third of the run to two thirds.
async fn pool(args: &DemoArgs) -> Result<(), String> {
    use crate::bench::pool::{Dep, Fail, Failing, Setup, THINK, run, table};
    let setup = Setup {
        name: "demo",
        deployments: vec![
            Dep {
                model: "dep-a",
                rate: 10.0,
                burst: 5,
            },
            Dep {
                model: "dep-b",
                rate: 20.0,
                burst: 5,
            },
            Dep {
                model: "dep-c",
                rate: 30.0,
                burst: 5,
            },
        ],
        strategy: sluice_gateway::config::Strategy::Fill,
        // Twice the pool's 60 a second, at a mean pause of a second.
        agents: args.agents.min(120),
        tenants: args.tenants,
        think: THINK,
        duration: args.duration,
        fail: Some(Fail {
            index: 1,
            how: Failing::Errors,
            from: args.duration / 3,
            until: args.duration * 2 / 3,
        }),
        redis: None,
        replicas: 1,
    };
    if !args.json {
        println!(
            "sluice demo --scenario pool: {} agents in {} tenants call `openai/gpt-4o-mini`, \
             a pool of three simulated deployments (10, 20 and 30 a second); dep-b fails \
             from {} s to {} s\n",
            setup.agents,
            setup.tenants,
            (setup.duration / 3).as_secs(),
            (setup.duration * 2 / 3).as_secs(),
        );
    }
    let r = run(&setup).await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", table(&r));
    }
    Ok(())
}

async fn demo(args: DemoArgs) -> Result<(), String> {
    let sim = sim_config(args.provider_rps.as_ref());
    let token = if args.ui { Some(ui_token()?) } else { None };
    let stack = Stack::start(sim.clone(), |c| {
        c.ui.token.clone_from(&token);
        sim_mcp_server(c);
    })
    .await?;
    if let Some(t) = &token {
        announce_ui(&stack, t);
    }
    let workload = Workload::mixed(&sim);
    let limits = limits(&workload, &sim);
    let swarm = |mode, url: String| {
        SwarmConfig::new(url, mode, workload.clone())
            .agents(args.agents)
            .tenants(args.tenants)
            .noisy_factor(2)
            .duration(args.duration)
            .tools_over_mcp(true)
    };
    if !args.json {
        println!(
            "sluice demo: {} agents in {} tenants, {} s per run, against simulated providers at {} (limits per model: {})\n",
            args.agents,
            args.tenants,
            args.duration.as_secs_f64(),
            stack.sim.url(),
            provider_limits(&sim),
        );
    }
    let title = "1/2 direct, with retries";
    let (direct, direct_tools) = run_once(
        &stack,
        swarm(Mode::Direct, stack.sim.url()),
        title,
        &limits,
        args.json,
    )
    .await?;
    let title = "2/2 through Sluice";
    let (through, through_tools) = run_once(
        &stack,
        swarm(Mode::Gateway, stack.gateway_url()),
        title,
        &limits,
        args.json,
    )
    .await?;
    stack.stop().await;
    if args.json {
        let summary = DemoSummary {
            agents: args.agents,
            tenants: args.tenants,
            duration_s: args.duration.as_secs_f64(),
            limits_per_second: limits,
            direct,
            sluice: through,
            tool_calls: [("direct", direct_tools), ("sluice", through_tools)].into(),
        };
        let json = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        println!();
        print!(
            "{}",
            side_by_side(&direct, &through, ("direct", "through Sluice"))
        );
        println!(
            "\ntool calls over MCP (tools/call to the sim's MCP server, then to Sluice's /mcp):\n{}\n{}",
            direct_tools.line("direct"),
            through_tools.line("through Sluice"),
        );
        println!(
            "\ngoodput: requests the providers admitted ÷ (limit × time + burst), summed over every model and API called.\n\
             fairness: Jain's index over each tenant's successful calls (1 = equal shares; tenant-1 runs twice the agents).\n\
             wasted calls: requests answered 429 or 5xx, which an agent has to send again."
        );
    }
    Ok(())
}

/// Each target's request limit per second, by swarm target name.
fn limits(workload: &Workload, sim: &SimConfig) -> BTreeMap<String, f64> {
    let rate = |l: Limits| l.rate_and_burst().map_or(0.0, |(r, _)| r);
    let models = workload.models.iter().map(|m| {
        (
            m.model.clone(),
            rate(
                sim.providers
                    .get(&m.provider)
                    .map_or(Limits::unlimited(), |p| p.limits),
            ),
        )
    });
    let apis = workload.apis.iter().map(|a| {
        (
            a.api.clone(),
            rate(
                sim.apis
                    .get(&a.api)
                    .map_or(Limits::unlimited(), |c| c.limits),
            ),
        )
    });
    models.chain(apis).collect()
}

fn provider_limits(sim: &SimConfig) -> String {
    ["openai", "anthropic", "google"]
        .iter()
        .filter_map(|p| {
            let (rate, burst) = sim.providers.get(*p)?.limits.rate_and_burst()?;
            Some(format!("{p} {rate}/s burst {burst}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One run: fresh upstream buckets and counters, the swarm with its live
/// view, then the score.
async fn run_once(
    stack: &Stack,
    config: SwarmConfig,
    title: &str,
    limits: &BTreeMap<String, f64>,
    json: bool,
) -> Result<(RunSummary, ToolCalls), String> {
    let mode = config.mode;
    let workload = config.workload.clone();
    stack.fresh_start(workload.target_names());
    let started = Instant::now();
    let swarm = Swarm::start(config).map_err(|e| e.to_string())?;
    let mut live = Live::new(json, title.to_owned(), mode, limits.clone());
    let poller = GatewayPoller::new(stack, &workload);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut gw = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if mode == Mode::Gateway {
                    gw = Some(poller.poll().await);
                }
                live.update(&swarm.progress(), &stack.sim.stats(), gw.as_ref());
            }
            () = tokio::time::sleep_until(swarm.ends()) => break,
        }
    }
    let progress = swarm.progress();
    let report = swarm.finish().await;
    let stats = stack.sim.stats();
    let elapsed = started.elapsed();
    live.update(&progress, &stats, gw.as_ref());
    let tools = ToolCalls::of(&report.targets, &stats);
    Ok((
        RunSummary::new(report, &stats, &stack.sim_config, elapsed),
        tools,
    ))
}

/// Reads the gateway's queues over its own API, as an operator would.
struct GatewayPoller {
    client: reqwest::Client,
    base: String,
    /// Limiter resource → swarm target name.
    names: BTreeMap<String, String>,
}

impl GatewayPoller {
    fn new(stack: &Stack, workload: &Workload) -> Self {
        let models = workload
            .models
            .iter()
            .map(|m| (format!("{}/{}", m.provider, m.model), m.model.clone()));
        let apis = workload
            .apis
            .iter()
            .map(|a| (format!("api:{}", a.api), a.api.clone()));
        GatewayPoller {
            client: reqwest::Client::builder()
                .timeout(Duration::from_millis(500))
                .build()
                .unwrap_or_default(),
            base: stack.gateway_url(),
            names: models.chain(apis).collect(),
        }
    }

    async fn poll(&self) -> GatewayView {
        let get = |path: &str| {
            let url = format!("{}{path}", self.base);
            async move {
                let r = self.client.get(url).send().await.ok()?;
                r.json::<serde_json::Value>().await.ok()
            }
        };
        let mut view = GatewayView::default();
        if let Some(ready) = get("/readyz").await {
            view.queued = ready["queued"].as_u64().unwrap_or(0);
        }
        if let Some(limits) = get("/v1/limits").await {
            for r in limits["resources"].as_array().into_iter().flatten() {
                let Some(name) = r["resource"].as_str().and_then(|n| self.names.get(n)) else {
                    continue;
                };
                view.waiting
                    .insert(name.clone(), r["waiting"].as_u64().unwrap_or(0));
            }
        }
        view
    }
}
