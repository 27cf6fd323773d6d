//! `sluice`: traffic control for AI agents.

mod admin;
#[allow(unsafe_code)]
mod alloc;
mod args;
mod audit;
mod bench;
mod client;
mod demo;
mod jobs;
mod live;
mod prices;
mod requests;
mod stack;
mod summary;
mod table;
mod top;
mod usage;

/// mimalloc rather than glibc's malloc: the gateway allocates and frees
/// per request (header maps, JSON, futures), and mimalloc's thread-local
/// free lists cost fewer instructions per pair (docs/gateway.md, "Where
/// the time goes"). The binary only: the library crates leave the choice
/// to their users. Asked through [`alloc::Mimalloc`], which keeps
/// ordinary layouts on mimalloc's fast path.
#[global_allocator]
static ALLOC: alloc::Mimalloc = alloc::Mimalloc;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Traffic control for AI agents: limits, queues, proxies and accounts for
/// every outbound call of an agent swarm.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway (embedded defaults when no config is given).
    #[command(
        after_help = "Logs go to stderr: SLUICE_LOG sets the level (error, warn, info, \
debug, trace; default info), SLUICE_LOG_FORMAT the format (pretty, the default, or json: one \
object a line). At info every request has one access line (target sluice::access)."
    )]
    Serve {
        /// The config file (TOML); `SLUICE_CONFIG` works too.
        #[arg(long, short, env = "SLUICE_CONFIG")]
        config: Option<PathBuf>,
        /// Listen here instead of the config's `listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Print the effective config (file + defaults + environment), each
    /// value marked with where it came from (`# default`, `# file …`,
    /// `# env …`), or the error naming the key and where it came from.
    CheckConfig {
        /// The config file; without one, the defaults and environment.
        file: Option<PathBuf>,
        /// Check the stores instead of printing the config: each SQLite
        /// file present (or not created yet), not emptied, readable and
        /// whole (every page read), without starting; PostgreSQL stores
        /// reachable. Exits 1 when one is not.
        #[arg(long)]
        stores: bool,
    },
    /// Run simulated providers and SaaS APIs (for tests, demos, benches).
    Sim {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:9090")]
        listen: SocketAddr,
        /// The simulator's config file (TOML).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Run a simulated agent swarm against simulated providers twice,
    /// directly and through Sluice, and compare.
    Demo(demo::DemoArgs),
    /// Look at and steer the durable jobs of a running gateway.
    Jobs(jobs::JobsArgs),
    /// Issue, list, rotate, revoke and block API keys (admin token).
    Keys(admin::KeysArgs),
    /// Create, list, change and block tenants (admin token).
    Tenants(admin::TenantsArgs),
    /// Create, list and change tiers: named limits tenants and keys share.
    Tiers(admin::TiersArgs),
    /// Calls, tokens and spend from the usage ledger, by tenant, key,
    /// model and feature (a table, --json or --csv).
    Usage(usage::UsageArgs),
    /// The request log of a running gateway: each call with its tenant,
    /// key, model, status, tokens, cost and times, newest first (refused
    /// and failed ones included; `--errors` for those only).
    Requests(requests::RequestsArgs),
    /// Who changed what: the audit trail of administrative acts (admin token).
    Audit(audit::AuditArgs),
    /// The live dashboard in the terminal (`/ui` in a browser), from a
    /// gateway's `GET /v1/dashboard/stream`.
    Top(top::TopArgs),
    /// What models cost under a config and where each price comes from;
    /// `refresh` downloads the community price map.
    Prices(prices::PricesArgs),
    /// Ask a gateway whether it is alive: exits 0 when the URL answers
    /// 2xx within the timeout, 1 otherwise (the image's health check;
    /// the image has no curl).
    Health {
        /// The URL to ask.
        #[arg(long, default_value = "http://127.0.0.1:8080/healthz")]
        url: String,
        /// How long to wait for the answer, in milliseconds.
        #[arg(long, default_value_t = 3000)]
        timeout_ms: u64,
    },
    /// Measure Sluice on this machine.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The gateway's added latency, top speed, and goodput and fairness
    /// under twice a provider's limit.
    Gateway(bench::GatewayArgs),
    /// The shared limiter: decisions/s and p99 per replica for a naive
    /// EVAL baseline, exact and leased modes, next to redis-benchmark.
    Redis(bench::redis::RedisArgs),
    /// The durable job queue: batched enqueue and burn-down jobs/s on
    /// SQLite (and PostgreSQL), rate accuracy and retry timing.
    Jobs(bench::jobs::JobsArgs),
    /// Adaptive control against a simulated provider whose limit is
    /// configured exactly, too high, changes mid-run, or is unknown.
    Adaptive(bench::adaptive::AdaptiveArgs),
    /// A capacity pool of simulated deployments under twice its capacity:
    /// goodput, 429s, fairness, each deployment's share, failover, and two
    /// replicas on one Redis.
    Pool(bench::pool::PoolArgs),
    /// The bare hop of `bench gateway` alone in front of a sim (for
    /// `bench/gateway/saturate.sh`).
    #[command(hide = true)]
    Hop(bench::saturate::HopArgs),
    /// A closed loop of chat completions over many connections (for
    /// `bench/gateway/saturate.sh`).
    #[command(hide = true)]
    Load(bench::saturate::LoadArgs),
}

fn main() -> ExitCode {
    // Before anything opens a database: SQLite takes its allocator only
    // before its first use, and keeps glibc's malloc if refused.
    let _ = alloc::sqlite_on_mimalloc();
    let cli = Cli::parse();
    use tracing_subscriber::filter::LevelFilter;
    // The demo and the bench draw on the terminal: only warnings and
    // errors from the servers inside them, unless asked.
    let quiet = matches!(
        cli.command,
        Command::Demo(_)
            | Command::Bench { .. }
            | Command::Jobs(_)
            | Command::Keys(_)
            | Command::Tenants(_)
            | Command::Tiers(_)
            | Command::Usage(_)
            | Command::Requests(_)
            | Command::Audit(_)
            | Command::Top(_)
            | Command::Health { .. }
            | Command::Prices(_)
    );
    init_logging(
        if quiet {
            LevelFilter::WARN
        } else {
            LevelFilter::INFO
        },
        quiet,
    );
    // Clients are made before the gateway (which installs it too); reqwest
    // is built with `rustls-no-provider`.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::CheckConfig { file, stores } => check_config(file, stores),
        Command::Serve { config, listen } => waiting().block_on(serve(config, listen)),
        Command::Sim { listen, config } => runtime().block_on(sim(listen, config)),
        Command::Demo(args) => runtime().block_on(demo::run(args)),
        Command::Top(args) => runtime().block_on(top::run(args)),
        Command::Jobs(args) => runtime().block_on(jobs::run(args)),
        Command::Keys(args) => runtime().block_on(admin::keys(args)),
        Command::Tenants(args) => runtime().block_on(admin::tenants(args)),
        Command::Tiers(args) => runtime().block_on(admin::tiers(args)),
        Command::Usage(args) => runtime().block_on(usage::run(args)),
        Command::Requests(args) => runtime().block_on(requests::run(args)),
        Command::Audit(args) => runtime().block_on(audit::run(args)),
        Command::Prices(args) => runtime().block_on(prices::run(args)),
        Command::Health { url, timeout_ms } => runtime().block_on(health(&url, timeout_ms)),
        Command::Bench { what } => runtime().block_on(async move {
            match what {
                BenchCommand::Gateway(args) => bench::gateway(args).await,
                BenchCommand::Redis(args) => bench::redis::redis(args).await,
                BenchCommand::Jobs(args) => bench::jobs::jobs(args).await,
                BenchCommand::Adaptive(args) => bench::adaptive::adaptive(args).await,
                BenchCommand::Pool(args) => bench::pool::pool(args).await,
                BenchCommand::Hop(args) => bench::saturate::hop(args).await,
                BenchCommand::Load(args) => bench::saturate::load(args).await,
            }
        }),
    }
}

/// `sluice health`: one GET, its status on stdout, exit 0 for a 2xx.
async fn health(url: &str, timeout_ms: u64) -> ExitCode {
    let client = match reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(timeout_ms))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            eprintln!("sluice health: http client: {e}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(url).send().await {
        Ok(answer) if answer.status().is_success() => {
            println!("{url}: {}", answer.status());
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprintln!("sluice health: {url} answered {}", answer.status());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sluice health: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Lines on stderr at `SLUICE_LOG` (error, warn, info, debug, trace;
/// default `default`), one event a line: readable (`SLUICE_LOG_FORMAT`
/// unset or `pretty`) or one JSON object (`json`), for a log shipper.
/// An unknown format or level is said once on stderr, and the default
/// is used. The MCP SDK's own lines (`rmcp`) show from `error` up (it
/// logs every JSON-RPC error answer, a refused tool call included, as a
/// warning; the gateway logs its refusals itself), or at `debug` and
/// `trace` when asked; with `quiet` (the demo and the bench, whose
/// in-process MCP clients and servers stop together at the end) only
/// when `SLUICE_LOG` asks.
fn init_logging(default: tracing_subscriber::filter::LevelFilter, quiet: bool) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let asked = std::env::var_os("SLUICE_LOG").is_some();
    let level = match std::env::var("SLUICE_LOG") {
        Ok(l) => l.parse().unwrap_or_else(|_| {
            eprintln!(
                "sluice: SLUICE_LOG={l:?} is not a level (error, warn, info, debug, trace, off): \
                 using {default}"
            );
            default
        }),
        Err(_) => default,
    };
    let json = match std::env::var("SLUICE_LOG_FORMAT").as_deref() {
        Err(_) | Ok("" | "pretty" | "text") => false,
        Ok("json") => true,
        Ok(other) => {
            eprintln!("sluice: SLUICE_LOG_FORMAT={other:?} is not json or pretty: using pretty");
            false
        }
    };
    // sqlx logs every statement at debug: the idle job poller alone is
    // dozens a second. Statements show at trace; slow ones (warn) always.
    let statements = if level >= LevelFilter::TRACE {
        LevelFilter::TRACE
    } else {
        level.min(LevelFilter::INFO)
    };
    let mcp = if quiet && !asked {
        LevelFilter::OFF
    } else if level >= LevelFilter::DEBUG {
        level
    } else {
        level.min(LevelFilter::ERROR)
    };
    let targets = Targets::new()
        .with_default(level)
        .with_target("sqlx::query", statements)
        .with_target("rmcp", mcp);
    let fmt = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    if json {
        fmt.json().flatten_event(true).finish().with(targets).init();
    } else {
        fmt.finish().with(targets).init();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// For `serve`, which only waits for the gateway's threads (it runs on
/// threads and runtimes of its own, `Gateway::spawn`): no worker threads
/// to park and wake beside them.
fn waiting() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        // The signal handlers are installed here (`shutdown_signal_now`).
        .enable_io()
        .build()
        .expect("a tokio runtime")
}

fn check_config(file: Option<PathBuf>, stores: bool) -> ExitCode {
    if !stores {
        // One load: `explain` checks the config as `load` does.
        return match sluice_gateway::config::explain(file.as_deref()) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sluice: {e}");
                ExitCode::from(2)
            }
        };
    }
    match sluice_gateway::config::load(file.as_deref()) {
        Ok(config) => check_stores(&config),
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
    }
}

/// `check-config --stores`: one line per store, exit 1 if one is not
/// fit to start on.
fn check_stores(config: &sluice_gateway::config::Config) -> ExitCode {
    let found = runtime().block_on(sluice_gateway::stores::inspect_all(config));
    let mut code = ExitCode::SUCCESS;
    if found.is_empty() {
        println!("no store is enabled");
    }
    for i in found {
        let at = i.store.location.display();
        match i.result {
            Ok(what) => println!("{} ({at}): {what}", i.store.name),
            Err(why) => {
                println!("{} ({at}): NOT OK: {why}", i.store.name);
                code = ExitCode::from(1);
            }
        }
    }
    code
}

async fn serve(config: Option<PathBuf>, listen: Option<SocketAddr>) -> ExitCode {
    let config = match sluice_gateway::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    // The handlers are installed before the gateway says where it listens.
    let shutdown = match sluice_gateway::shutdown_signal_now() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice: cannot install the SIGTERM and SIGINT handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let serving = match sluice_gateway::Gateway::spawn(config, listen, shutdown).await {
        Ok(s) => s,
        Err(e) => {
            // The cause of a start error is its source.
            eprintln!("sluice: {}", sluice_gateway::error::chain(&e));
            return ExitCode::from(1);
        }
    };
    eprintln!("sluice: listening on http://{}", serving.local_addr());
    match serving.stopped().await {
        Ok(()) => {
            eprintln!("sluice: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

async fn sim(listen: SocketAddr, config: Option<PathBuf>) -> ExitCode {
    let config = match config {
        None => sluice_sim::SimConfig::default(),
        Some(path) => match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|s| toml::from_str(&s).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("sluice: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    let handle = match sluice_sim::Sim::start(config, listen).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!("sluice sim: listening on http://{}", handle.addr());
    sluice_gateway::shutdown_signal().await;
    handle.shutdown().await;
    ExitCode::SUCCESS
}
