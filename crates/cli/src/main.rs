//! `sluice`: traffic control for AI agents.

use clap::Parser;

/// Traffic control for AI agents: limits, queues, proxies and accounts for
/// every outbound call of an agent swarm.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
