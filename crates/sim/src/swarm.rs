//! A simulated agent swarm: N agents in T tenants calling models and
//! tools for a while, either straight at the sim with the retry loop
//! agents typically use, or through a Sluice gateway.
//!
//! Each agent is a **closed loop**: one call at a time, then a pause to
//! think, then the next step, as an agent waits for a model's answer
//! before it acts on it. Offered load is therefore `agents ÷ (think +
//! latency)`, and a slower upstream slows the swarm down, as it does real
//! agents. Everything is bounded: the agents, the run's length (agents are
//! stopped at its end, and calls then under way are reported as
//! unfinished), each request's timeout.
//!
//! ```no_run
//! use std::time::Duration;
//! use sluice_sim::swarm::{Mode, Swarm, SwarmConfig, Workload};
//! use sluice_sim::{Sim, SimConfig};
//!
//! # async fn run() -> Result<(), sluice_sim::Error> {
//! let sim = Sim::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap()).await?;
//! let config = SwarmConfig::new(sim.url(), Mode::Direct, Workload::mixed(&SimConfig::default()))
//!     .agents(50)
//!     .tenants(3)
//!     .duration(Duration::from_secs(10));
//! let report = Swarm::start(config)?.finish().await;
//! println!("{} calls ok, {} 429s", report.ok, report.upstream_429s_seen);
//! # Ok(())
//! # }
//! ```

mod agent;
mod config;
mod mcp;
mod record;
mod score;
mod workload;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use config::{RetryPolicy, SwarmConfig};
pub use record::{Percentiles, TargetProgress, TenantProgress, latency_histogram};
pub use score::{Goodput, UpstreamGoodput, capacity, goodput, jain, most_in_window};
pub use workload::{ApiTarget, ModelTarget, Workload};

use crate::Error;
use record::Tally;

/// Most agents one swarm runs.
pub const MAX_AGENTS: usize = 10_000;
/// Longest run.
pub const MAX_DURATION: Duration = Duration::from_secs(3_600);

/// Where the swarm's calls go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Straight at the sim: `/{provider}/v1/…` and `/{api}/…`.
    Direct,
    /// Through a Sluice gateway: `/v1/…` with `provider/model` names, and
    /// `/proxy/{api}/…`.
    Gateway,
}

/// A running swarm.
#[derive(Debug)]
pub struct Swarm {
    shared: Arc<agent::Shared>,
    agents: JoinSet<()>,
    started: Instant,
    ends: Instant,
}

/// Where a running swarm stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// The run's length in seconds.
    pub duration_s: f64,
    /// Per model and API, models first.
    pub targets: Vec<TargetProgress>,
    /// Per tenant.
    pub tenants: Vec<TenantProgress>,
}

/// What a finished swarm saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwarmReport {
    /// Direct or through a gateway.
    pub mode: Mode,
    /// How long it ran, in seconds.
    pub elapsed_s: f64,
    /// Calls answered 2xx.
    pub ok: u64,
    /// Calls that gave up (retries spent, or a 4xx).
    pub failed: u64,
    /// Calls under way when the run ended.
    pub unfinished: u64,
    /// Requests sent, retries included.
    pub attempts: u64,
    /// Requests that did no work: answered 429 or 5xx, or lost.
    pub wasted_calls: u64,
    /// 429s from upstreams, as the agents saw them (directly, or from the
    /// gateway's `x-sluice-attempts`). The sim's own count is the
    /// authority.
    pub upstream_429s_seen: u64,
    /// Latency of successful calls, retries and backoff included.
    pub latency: Percentiles,
    /// Time to finish a task, retries and waits included, over every
    /// finished task: those given up count too (they are what makes
    /// direct calls look fast by their successes alone).
    #[serde(default)]
    pub task_time: Percentiles,
    /// Jain's index over the tenants' successful calls.
    pub fairness: f64,
    /// Per tenant.
    pub tenants: Vec<TenantProgress>,
    /// Per model and API.
    pub targets: Vec<TargetProgress>,
}

impl Swarm {
    /// Starts the agents on the current tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad setting.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(config: SwarmConfig) -> Result<Swarm, Error> {
        config.check()?;
        // Loopback only and plain HTTP, but reqwest may be built with
        // `rustls-no-provider` (the gateway's choice): give it a provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .pool_max_idle_per_host(config.agents)
            .build()
            .map_err(|e| Error::invalid("client", e.to_string()))?;
        let split = config.split();
        let tenants: Vec<String> = (1..=config.tenants)
            .map(|t| format!("tenant-{t}"))
            .collect();
        let targets = config
            .workload
            .target_names()
            .map(|(name, kind)| TargetProgress {
                name: name.to_owned(),
                kind: kind.to_owned(),
                ..TargetProgress::default()
            })
            .collect();
        let tenant_rows = tenants
            .iter()
            .zip(&split)
            .map(|(name, &agents)| TenantProgress {
                name: name.clone(),
                agents,
                ..TenantProgress::default()
            })
            .collect();
        let shared = Arc::new(agent::Shared {
            client,
            bases: std::iter::once(config.base_url.clone())
                .chain(config.replicas.iter().cloned())
                .collect(),
            tenant_per_replica: config.tenant_per_replica,
            mode: config.mode,
            workload: config.workload.clone(),
            retry: config.retry,
            tenants,
            tally: Tally::new(targets, tenant_rows),
            mcp: config.tools_over_mcp.then(mcp::Sessions::default),
        });
        let mut agents = JoinSet::new();
        let mut seed = fastrand::Rng::with_seed(config.seed);
        for (tenant, &n) in split.iter().enumerate() {
            for _ in 0..n {
                agents.spawn(agent::run(Arc::clone(&shared), tenant, seed.u64(..)));
            }
        }
        let started = Instant::now();
        Ok(Swarm {
            shared,
            agents,
            started,
            ends: started + config.duration,
        })
    }

    /// Where it stands now.
    pub fn progress(&self) -> Progress {
        Progress {
            elapsed_s: self.started.elapsed().as_secs_f64(),
            duration_s: (self.ends - self.started).as_secs_f64(),
            targets: self.shared.tally.targets(),
            tenants: self.shared.tally.tenants(),
        }
    }

    /// When the agents will be stopped.
    pub fn ends(&self) -> Instant {
        self.ends
    }

    /// Waits for the end of the run, stops the agents and reports.
    pub async fn finish(mut self) -> SwarmReport {
        tokio::time::sleep_until(self.ends).await;
        self.agents.abort_all();
        while self.agents.join_next().await.is_some() {}
        let elapsed = self.started.elapsed();
        let targets = self.shared.tally.targets();
        let tenants = self.shared.tally.tenants();
        let sum = |f: fn(&TargetProgress) -> u64| targets.iter().map(f).sum::<u64>();
        let goodput: Vec<f64> = tenants.iter().map(|t| t.ok as f64).collect();
        SwarmReport {
            mode: self.shared.mode,
            elapsed_s: elapsed.as_secs_f64(),
            ok: sum(|t| t.ok),
            failed: sum(|t| t.failed),
            unfinished: sum(|t| t.in_flight),
            attempts: sum(|t| t.attempts),
            wasted_calls: sum(|t| t.wasted),
            upstream_429s_seen: sum(|t| t.upstream_429s),
            latency: Percentiles::of(&self.shared.tally.latency()),
            task_time: Percentiles::of(&self.shared.tally.task_time()),
            fairness: jain(&goodput),
            tenants,
            targets,
        }
    }
}

/// A random idempotency key.
pub(crate) fn new_key() -> String {
    format!("swarm-{:016x}", fastrand::u64(..))
}
