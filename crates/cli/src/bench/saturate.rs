//! Two hidden commands for counting what a hop does per request at
//! saturation with `perf stat -p` (`bench/gateway/saturate.sh`): the
//! bare hop of `sluice bench gateway` alone, and a closed loop that sends
//! a fixed number of chat completions over many connections.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::task::JoinSet;

use super::bare::BareHop;
use super::open_loop::send;
use super::requests::{chat, client};

/// `sluice bench hop`: the bare hop in front of a sim.
#[derive(Debug, Clone, clap::Args)]
pub struct HopArgs {
    /// The sim, e.g. `http://127.0.0.1:56171`.
    #[arg(long)]
    pub upstream: String,
}

/// `sluice bench load`: a closed loop of chat completions.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// The gateway, the bare hop or the sim, e.g. `http://127.0.0.1:8080`.
    #[arg(long)]
    pub target: String,
    /// Keep-alive connections, each sending its next request when the
    /// last is answered.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Requests in all.
    #[arg(long, default_value_t = 20_000)]
    pub requests: u64,
    /// Send as to the sim (or the bare hop in front of it): the
    /// provider's path and the bare model name.
    #[arg(long)]
    pub direct: bool,
}

/// Runs the hop until SIGINT or SIGTERM; prints its URL first.
pub async fn hop(args: HopArgs) -> ExitCode {
    let hop = match BareHop::start(&args.upstream) {
        Ok(hop) => hop,
        Err(e) => {
            eprintln!("sluice bench: {e}");
            return ExitCode::from(1);
        }
    };
    println!("{}", hop.url());
    sluice_gateway::shutdown_signal().await;
    drop(hop);
    ExitCode::SUCCESS
}

/// Sends `--requests` chat completions; prints how many were answered
/// and how many of those were not 2xx.
pub async fn load(args: LoadArgs) -> ExitCode {
    if !(1..=4_096).contains(&args.connections) {
        eprintln!("sluice bench: --connections must be 1 to 4096");
        return ExitCode::from(2);
    }
    let client = client(args.connections);
    let make = Arc::new(chat(
        &client,
        args.target.trim_end_matches('/'),
        args.direct,
    ));
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut loops = JoinSet::new();
    for _ in 0..args.connections {
        let (make, next, failed) = (Arc::clone(&make), Arc::clone(&next), Arc::clone(&failed));
        loops.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < args.requests {
                if !send(make()).await {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
    let failed = failed.load(Ordering::Relaxed);
    println!("{} answered, {failed} not 2xx", args.requests);
    if failed > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
