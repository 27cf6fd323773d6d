//! `sluice bench gateway`: the gateway measured as an operator would, on
//! loopback, each figure next to its baseline from the same run.
//!
//! (a) Added latency: the same fixed-rate open-loop stream of chat
//!     completions, sent straight to the sim and through the gateway,
//!     limits off; latency from each request's due time (coordinated
//!     omission corrected). Once against a sim that answers at once, at
//!     `--rate` (1,000 a second), and once at 20 a second in front of a
//!     sim that takes 20 ms, as a real provider nearby does.
//!     The gateway's CPU time ÷ requests, for the non-streamed stream and
//!     for the same stream of streamed completions (the gateway runs on
//!     threads of its own: see `stack::gateway_cpu`).
//! (b) Most requests a second with limits off, through the gateway and
//!     straight to the sim, with a fixed number of connections.
//! (c) A swarm at twice one model's limit, configured alike in the sim
//!     and the gateway: goodput as a share of capacity, upstream 429s,
//!     Jain's fairness across equal-weight tenants.
//! (d) What keys and budgets cost: (a)'s non-streamed stream through the
//!     gateway without a key, then with a key of the key store whose
//!     tenant has budgets of money, tokens and requests and a per-key
//!     request limit (authentication from the cache, the per-key limit,
//!     a reserve and a settle per call): latency and CPU per request side
//!     by side. In-process only (it creates the tenant and key).
//! (e) OpenTelemetry export off and on: latency and CPU per request
//!     ([`otel`]); `--otel-only` runs this part alone.
//!
//! (a) and (b) also send a request the response cache answers (the same
//! chat completion at `temperature` 0, stored by the warm-up): a hit's
//! latency and throughput beside a proxied call to the 0 ms sim.
//!
//! With `--target URL`, (a) and (b) go through the gateway at URL instead
//! of the in-process one (the direct baseline is still the in-process
//! sim); (c) always runs in-process.

pub mod adaptive;
mod closed_loop;
pub mod jobs;
mod open_loop;
mod otel;
pub mod redis;
mod report;

use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use sluice_admit::PoolConfig;
use sluice_gateway::config::Config;
use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
use sluice_sim::{Latency, Limits, SimConfig};
use tokio::time::Instant;

use crate::stack::Stack;
use crate::summary::RunSummary;
use report::{Cpu, CpuPart, KeysPart, LatencyPart, Report, SlowPart, SwarmPart, ThroughputPart};

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
}

/// The model every request of (a) and (b) names.
const PROVIDER: &str = "openai";
const MODEL: &str = "gpt-4o-mini";
/// (a) in front of a slow upstream: requests a second, and the
/// upstream's time to answer.
const SLOW_RATE: f64 = 20.0;
const SLOW_UPSTREAM: Duration = Duration::from_millis(20);
/// (c): the model's limit in the sim and the gateway, requests a second.
const SWARM_LIMIT: f64 = 50.0;
/// (c): tenants, equal weight; the first runs twice the agents of each
/// other.
const SWARM_TENANTS: usize = 4;
/// (d): the in-process gateway's operator token, to issue the key.
const BENCH_ADMIN: &str = "sluice-bench";
/// (c): the agents' pause between calls, uniform; its mean (1 s) times
/// twice the limit gives the number of agents.
const SWARM_THINK: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_millis(1_500));

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
    finish(args.json, run(&args).await, Report::table)
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
pub(crate) fn note(json: bool, what: &str) {
    if !json {
        eprintln!("bench: {what}");
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

fn client(connections: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

/// A non-streamed chat completion, straight to the sim or through a
/// gateway.
fn chat(
    client: &reqwest::Client,
    base: &str,
    direct: bool,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let (url, model) = if direct {
        (
            format!("{base}/{PROVIDER}/v1/chat/completions"),
            MODEL.to_owned(),
        )
    } else {
        (
            format!("{base}/v1/chat/completions"),
            format!("{PROVIDER}/{MODEL}"),
        )
    };
    let body = json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]});
    request(client, url, body)
}

/// A streamed chat completion through a gateway, its usage asked for as
/// a client that counts its tokens does.
fn streamed_chat(
    client: &reqwest::Client,
    base: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let model = format!("{PROVIDER}/{MODEL}");
    let body = json!({"model": model, "max_tokens": 16, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "ping"}]});
    request(client, url, body)
}

/// A chat completion at `temperature` 0 through a gateway: after the
/// first, answered by its cache.
fn cached_chat(
    client: &reqwest::Client,
    base: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let model = format!("{PROVIDER}/{MODEL}");
    let body = json!({"model": model, "max_tokens": 16, "temperature": 0, "messages": [{"role": "user", "content": "ping"}]});
    request(client, url, body)
}

fn request(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    keyed_request(client, url, body, None)
}

/// [`request`] as the holder of `key`, when given.
fn keyed_request(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
    key: Option<String>,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let body = body.to_string();
    let client = client.clone();
    move || {
        let r = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone());
        match &key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }
}

/// (a)'s non-streamed chat completion through the gateway, as `key`.
fn keyed_chat(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> impl Fn() -> reqwest::RequestBuilder + Send + Sync + 'static {
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"model": format!("{PROVIDER}/{MODEL}"), "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]});
    keyed_request(client, url, body, Some(key.to_owned()))
}

/// A tenant with budgets far above the load (so every call reserves and
/// settles, none is refused) and a key of it with a request limit, issued
/// through the admin API; the key.
async fn bench_key(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let post = |path: &str, body: serde_json::Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(BENCH_ADMIN)
            .json(&body)
            .send()
    };
    let tenant = json!({"name": "bench", "budgets": [
        {"name": "monthly", "money": "1000000", "period": "month", "time_zone": "Europe/Paris"},
        {"name": "daily", "tokens": 1_000_000_000_000u64, "requests": 1_000_000_000u64, "window_seconds": 86_400}
    ]});
    let key = json!({"tenant": "bench", "limits": {"requests_per_minute": 100_000_000u64}});
    let failed = |what: &str, e: String| format!("(d) cannot create the bench's {what}: {e}");
    let res = post("/v1/tenants", tenant)
        .await
        .map_err(|e| failed("tenant", e.to_string()))?;
    if !res.status().is_success() {
        return Err(failed("tenant", res.text().await.unwrap_or_default()));
    }
    let res = post("/v1/keys", key)
        .await
        .map_err(|e| failed("key", e.to_string()))?;
    let body: serde_json::Value = res.json().await.map_err(|e| failed("key", e.to_string()))?;
    body["key"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| failed("key", body.to_string()))
}

/// (d): (a)'s stream through the in-process gateway without a key, then
/// with a key and budgets.
async fn keys_and_budgets(
    args: &GatewayArgs,
    client: &reqwest::Client,
    base: &str,
    max_outstanding: usize,
) -> Result<KeysPart, String> {
    note(args.json, "(d) (a) through the gateway again, no key");
    let before = crate::stack::gateway_cpu();
    let off = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(client, base, false),
    )
    .await;
    let off_cpu = Cpu::between(before, crate::stack::gateway_cpu(), &off);
    let key = bench_key(client, base).await?;
    // Warm the key, tenant and tier caches and open the budgets.
    let make = keyed_chat(client, base, &key);
    for _ in 0..50 {
        if !open_loop::send(make()).await {
            return Err("(d) the gateway does not answer the bench's key".into());
        }
    }
    note(args.json, "(d) the same with a key, its limit and budgets");
    let before = crate::stack::gateway_cpu();
    let on = open_loop::run(args.rate, args.duration, max_outstanding, make).await;
    let on_cpu = Cpu::between(before, crate::stack::gateway_cpu(), &on);
    Ok(KeysPart::new(&off, &on, off_cpu, on_cpu))
}

async fn run(args: &GatewayArgs) -> Result<Report, String> {
    let stack = Stack::start(SimConfig::unlimited(), limits_off).await?;
    let sim = stack.sim.url();
    let gateway = args.target.clone().unwrap_or_else(|| stack.gateway_url());
    let gateway = gateway.trim_end_matches('/').to_owned();
    let direct_client = client(args.connections);
    let gateway_client = client(args.connections);
    // Open the connections and fill the caches before anything counts.
    warm(&direct_client, &sim, true, 50).await?;
    warm(&gateway_client, &gateway, false, 50).await?;
    // Stores the answer the cached stream is served from.
    if !open_loop::send(cached_chat(&gateway_client, &gateway)()).await {
        return Err(format!(
            "{gateway} does not answer a cached chat completion"
        ));
    }

    let max_outstanding = (args.rate as usize).max(64) * 10;
    note(
        args.json,
        &format!(
            "(a) open loop at {} req/s for {:.0} s, direct",
            args.rate,
            args.duration.as_secs_f64()
        ),
    );
    let direct = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(&direct_client, &sim, true),
    )
    .await;
    note(args.json, "(a) the same through the gateway");
    let (through, cpu) = with_cpu(open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(&gateway_client, &gateway, false),
    ))
    .await;
    note(args.json, "(a) the same streamed, through the gateway");
    let (streamed, streamed_cpu) = with_cpu(open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        streamed_chat(&gateway_client, &gateway),
    ))
    .await;
    note(
        args.json,
        "(a) the same through the gateway, answered by its cache",
    );
    let cached = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        cached_chat(&gateway_client, &gateway),
    )
    .await;
    let mut latency = LatencyPart::new(
        args.rate,
        args.duration,
        &direct,
        &through,
        &cached,
        &streamed,
    );
    // An external gateway's threads are not ours to read.
    if args.target.is_none()
        && let (Some(non_streamed), Some(streamed)) = (cpu, streamed_cpu)
    {
        latency.cpu = Some(CpuPart {
            non_streamed,
            streamed,
        });
    }

    let each = (args.duration / 2).max(Duration::from_secs(1));
    note(
        args.json,
        &format!(
            "(b) {} connections for {:.1} s, direct",
            args.connections,
            each.as_secs_f64()
        ),
    );
    let direct = closed_loop::run(args.connections, each, chat(&direct_client, &sim, true)).await;
    note(args.json, "(b) the same through the gateway");
    let through = closed_loop::run(
        args.connections,
        each,
        chat(&gateway_client, &gateway, false),
    )
    .await;
    note(args.json, "(b) the same answered by the gateway's cache");
    let cached = closed_loop::run(
        args.connections,
        each,
        cached_chat(&gateway_client, &gateway),
    )
    .await;
    let throughput = ThroughputPart::new(args.connections, each, direct, through, cached);
    // Last on this stack: once the store has a tenant, calls need a key.
    let keys = if args.target.is_none() {
        let base = stack.gateway_url();
        let base = base.trim_end_matches('/');
        Some(keys_and_budgets(args, &gateway_client, base, max_outstanding).await?)
    } else {
        None
    };
    stack.stop().await;

    let slow = slow_upstream(args).await?;
    note(
        args.json,
        &format!(
            "(c) swarm at twice {SWARM_LIMIT} req/s for {:.0} s through the gateway",
            args.duration.as_secs_f64()
        ),
    );
    let swarm = swarm(args.duration).await?;
    let otel = otel::run(args).await?;
    Ok(Report {
        target: args.target.clone(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        latency,
        slow,
        throughput,
        swarm,
        otel,
        keys,
    })
}

/// Opens connections to `base` (the sim when `direct`, else a gateway)
/// with `n` chat completions, each of which must succeed.
async fn warm(client: &reqwest::Client, base: &str, direct: bool, n: usize) -> Result<(), String> {
    let make = chat(client, base, direct);
    for _ in 0..n {
        if !open_loop::send(make()).await {
            return Err(format!(
                "{base} does not answer a chat completion for {PROVIDER}/{MODEL}"
            ));
        }
    }
    Ok(())
}

/// Runs `stream`, and reads the in-process gateway's CPU time around it.
async fn with_cpu(
    stream: impl std::future::Future<Output = open_loop::Measured>,
) -> (open_loop::Measured, Option<Cpu>) {
    let before = crate::stack::gateway_cpu();
    let measured = stream.await;
    let cpu = Cpu::between(before, crate::stack::gateway_cpu(), &measured);
    (measured, cpu)
}

/// (a) in front of an upstream that takes [`SLOW_UPSTREAM`] to answer,
/// at [`SLOW_RATE`]: what the gateway adds where a real provider sets
/// the pace.
async fn slow_upstream(args: &GatewayArgs) -> Result<SlowPart, String> {
    let mut sim = SimConfig::unlimited();
    sim.defaults.latency = Latency {
        base_ms: SLOW_UPSTREAM.as_millis() as u64,
        ..Latency::default()
    };
    let stack = Stack::start(sim, limits_off).await?;
    let sim = stack.sim.url();
    let gateway = args.target.clone().unwrap_or_else(|| stack.gateway_url());
    let gateway = gateway.trim_end_matches('/').to_owned();
    let client = client(args.connections);
    warm(&client, &sim, true, 5).await?;
    warm(&client, &gateway, false, 5).await?;
    let max_outstanding = 1_000;
    note(
        args.json,
        &format!(
            "(a) open loop at {SLOW_RATE} req/s for {:.0} s, {} ms upstream, direct",
            args.duration.as_secs_f64(),
            SLOW_UPSTREAM.as_millis()
        ),
    );
    let direct = open_loop::run(
        SLOW_RATE,
        args.duration,
        max_outstanding,
        chat(&client, &sim, true),
    )
    .await;
    note(args.json, "(a) the same through the gateway");
    let through = open_loop::run(
        SLOW_RATE,
        args.duration,
        max_outstanding,
        chat(&client, &gateway, false),
    )
    .await;
    stack.stop().await;
    Ok(SlowPart::new(
        SLOW_RATE,
        SLOW_UPSTREAM,
        args.duration,
        &direct,
        &through,
    ))
}

/// (c): one model limited alike in the sim and the gateway, a swarm
/// whose agents would call it twice as often as it allows.
async fn swarm(duration: Duration) -> Result<SwarmPart, String> {
    let mut sim = SimConfig {
        seed: Some(7),
        ..SimConfig::default()
    };
    // A provider 20 ms away, reached with up to 10 ms of jitter.
    sim.defaults.latency = Latency {
        base_ms: 20,
        jitter_ms: 10,
        ..Latency::default()
    };
    let limits = Limits::per_second(SWARM_LIMIT).burst(SWARM_LIMIT as u32);
    if let Some(p) = sim.providers.get_mut(PROVIDER) {
        p.limits = limits;
    }
    let stack = Stack::start(sim, |_| {}).await?;
    let mean_think = (SWARM_THINK.0 + SWARM_THINK.1).as_secs_f64() / 2.0;
    let agents = (2.0 * SWARM_LIMIT * mean_think).round() as usize;
    let workload = Workload::single_model(PROVIDER, MODEL, SWARM_THINK);
    stack.fresh_start(workload.target_names());
    let config = SwarmConfig::new(stack.gateway_url(), Mode::Gateway, workload)
        .agents(agents)
        .tenants(SWARM_TENANTS)
        .noisy_factor(2)
        .duration(duration);
    let started = Instant::now();
    let report = Swarm::start(config)
        .map_err(|e| e.to_string())?
        .finish()
        .await;
    let stats = stack.sim.stats();
    let summary = RunSummary::new(report, &stats, &stack.sim_config, started.elapsed());
    stack.stop().await;
    Ok(SwarmPart {
        model: format!("{PROVIDER}/{MODEL}"),
        limit_per_second: SWARM_LIMIT,
        burst: SWARM_LIMIT as u64,
        agents,
        offered_per_second: agents as f64 / mean_think,
        run: summary,
    })
}
