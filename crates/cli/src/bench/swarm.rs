//! (c) A swarm at twice one model's limit: goodput, upstream 429s and
//! fairness across tenants.

use std::time::Duration;

use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
use sluice_sim::{Latency, Limits, SimConfig};
use tokio::time::Instant;

use super::report::SwarmPart;
use super::{MODEL, PROVIDER};
use crate::stack::Stack;
use crate::summary::RunSummary;

/// The model's limit in the sim and the gateway, requests a second.
pub(super) const SWARM_LIMIT: f64 = 50.0;
/// Tenants, equal weight; the first runs twice the agents of each other.
const SWARM_TENANTS: usize = 4;
/// The agents' pause between calls, uniform; its mean (1 s) times twice
/// the limit gives the number of agents.
const SWARM_THINK: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_millis(1_500));

/// (c): one model limited alike in the sim and the gateway, a swarm
/// whose agents would call it twice as often as it allows.
pub(super) async fn swarm(duration: Duration) -> Result<SwarmPart, String> {
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
