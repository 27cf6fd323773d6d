//! The sim and a gateway in front of it, in this process, on loopback:
//! what `sluice demo` and `sluice bench gateway` measure.

use std::net::SocketAddr;
use std::path::PathBuf;

use sluice_gateway::config::{Config, ModelLimits};
use sluice_sim::{Limits, Scope, Sim, SimConfig, SimHandle};
use tokio::sync::oneshot;

/// A rate high enough to be no limit at all (and a whole number, which
/// the gateway's limiter takes as is).
pub const NO_LIMIT: f64 = 1_000_000.0;

/// A running sim and gateway (or several gateway replicas sharing their
/// limits through Redis); [`Stack::stop`] stops them all and removes the
/// gateways' data directories.
#[derive(Debug)]
pub struct Stack {
    pub sim: SimHandle,
    pub sim_config: SimConfig,
    /// The first gateway.
    pub gateway: SocketAddr,
    gateways: Vec<Running>,
    data_dir: PathBuf,
}

/// One gateway serving until told to stop, on threads of its own, as
/// `sluice serve` runs it ([`sluice_gateway::Gateway::spawn`]).
///
/// A gateway in production is a process of its own; here it shares the
/// machine with the sim and the load, but not their worker threads: a
/// request's gateway work never waits behind the sim's on the same
/// worker, and the gateway's CPU time can be read apart from theirs
/// ([`gateway_cpu`]).
#[derive(Debug)]
struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    serving: sluice_gateway::Serving,
}

impl Running {
    async fn start(config: Config) -> Result<Running, String> {
        let (stop, stopped) = oneshot::channel();
        let serving = sluice_gateway::Gateway::spawn(config, Some(loopback()), async move {
            let _ = stopped.await;
        })
        .await
        .map_err(|e| sluice_gateway::error::chain(&e))?;
        Ok(Running {
            addr: serving.local_addr(),
            stop,
            serving,
        })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.serving.stopped().await {
            eprintln!("sluice: gateway {}: {e}", self.addr);
        }
    }
}

/// CPU time the in-process gateways' threads (serving and background,
/// found by name: [`sluice_gateway::is_gateway_thread`]) have spent so
/// far (the kernel's per-thread run time, in nanoseconds); `None` where
/// the kernel does not say (not Linux).
pub fn gateway_cpu() -> Option<std::time::Duration> {
    threads_cpu(sluice_gateway::is_gateway_thread)
}

/// CPU time the bench's bare hop's threads have spent so far
/// (`bench/bare.rs`), as [`gateway_cpu`] reads the gateway's.
pub fn bare_cpu() -> Option<std::time::Duration> {
    threads_cpu(|name| name == crate::bench::BARE_THREADS)
}

/// [`gateway_cpu`] with the threads that write for the gateways: the
/// usage ledger's writer and SQLite's (sqlx runs each SQLite connection
/// on a thread of its own), whose work requests cause without waiting
/// for it.
pub fn gateway_and_writers_cpu() -> Option<std::time::Duration> {
    threads_cpu(|name| {
        sluice_gateway::is_gateway_thread(name)
            || name == sluice_gateway::LEDGER_THREAD
            || name.starts_with("sqlx-sqlite")
    })
}

/// CPU time this process's threads (all of them, and sqlx's SQLite
/// connection threads among them) have spent so far, as [`gateway_cpu`]
/// reads the gateway's: what `sluice bench jobs` charges a burn-down.
pub fn process_and_sqlite_cpu() -> [Option<std::time::Duration>; 2] {
    [
        threads_cpu(|_| true),
        threads_cpu(|name| name.starts_with("sqlx-sqlite")),
    ]
}

/// CPU time spent so far by this process's threads whose name passes
/// `counted`.
fn threads_cpu(counted: impl Fn(&str) -> bool) -> Option<std::time::Duration> {
    let mut total = 0u64;
    let mut found = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !counted(name.trim_end()) {
            continue;
        }
        // `schedstat`: time on the CPU (ns), time waiting for one, slices.
        let ran = std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        if let Some(ns) = ran {
            total += ns;
            found = true;
        }
    }
    found.then(|| std::time::Duration::from_nanos(total))
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl Stack {
    /// Starts the sim with `sim_config`, then a gateway from
    /// [`gateway_config`] changed by `tweak`.
    pub async fn start(
        sim_config: SimConfig,
        tweak: impl FnOnce(&mut Config),
    ) -> Result<Stack, String> {
        let sim = Sim::start(sim_config.clone(), loopback())
            .await
            .map_err(|e| e.to_string())?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let data_dir = std::env::temp_dir().join(format!("sluice-{}-{nanos}", std::process::id()));
        let mut config = gateway_config(&sim.url(), &sim_config, data_dir.clone());
        tweak(&mut config);
        let first = Running::start(config).await?;
        Ok(Stack {
            sim,
            sim_config,
            gateway: first.addr,
            gateways: vec![first],
            data_dir,
        })
    }

    /// Starts another gateway in front of the same sim, configured as
    /// the first one is by [`gateway_config`] and `tweak` (which gives it
    /// the same `[redis]` to share limits), with data of its own.
    pub async fn add_gateway(&mut self, tweak: impl FnOnce(&mut Config)) -> Result<(), String> {
        let dir = self
            .data_dir
            .join(format!("replica-{}", self.gateways.len()));
        let mut config = gateway_config(&self.sim.url(), &self.sim_config, dir);
        tweak(&mut config);
        self.gateways.push(Running::start(config).await?);
        Ok(())
    }

    /// `http://{gateway}` of every gateway, the first first.
    pub fn gateway_urls(&self) -> Vec<String> {
        self.gateways
            .iter()
            .map(|g| format!("http://{}", g.addr))
            .collect()
    }

    /// `http://{gateway}`.
    pub fn gateway_url(&self) -> String {
        format!("http://{}", self.gateway)
    }

    /// Zeroes the sim's counters and fills every bucket of the models and
    /// APIs in `names`, so that a run starts as a fresh provider would.
    pub fn fresh_start<'a, 'b>(&self, names: impl IntoIterator<Item = (&'a str, &'b str)>) {
        for (name, kind) in names {
            let (scope, limits) = match kind {
                "api" => (
                    Scope::Api(name.to_owned()),
                    self.sim_config.apis.get(name).map(|a| a.limits),
                ),
                _ => (
                    Scope::Model(name.to_owned()),
                    model_limits(&self.sim_config, name),
                ),
            };
            if let Some(limits) = limits {
                // Setting a limit refills its bucket.
                let _ = self.sim.set_limits(scope, limits);
            }
        }
        self.sim.reset();
    }

    /// Stops the gateways (draining) and the sim.
    pub async fn stop(self) {
        for g in self.gateways {
            g.stop().await;
        }
        self.sim.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// A model's limits in the sim: its own, else its provider's.
fn model_limits(config: &SimConfig, model: &str) -> Option<Limits> {
    if let Some(l) = config.models.get(model).and_then(|m| m.limits) {
        return Some(l);
    }
    config
        .providers
        .values()
        .find(|p| p.models.iter().any(|m| m == model))
        .map(|p| p.limits)
}

/// The gateway's rate and burst for an upstream limit of `rate_and_burst`
/// (`None`: unlimited): exactly the upstream's, as a user configures the
/// limits a provider publishes. Jitter between the gateway and the
/// upstream is the limiter's business (its jitter margin and the evidence
/// policy), not the configuration's.
fn exact(rate_and_burst: Option<(f64, u32)>) -> (f64, u64) {
    match rate_and_burst {
        Some((rate, burst)) => (rate, u64::from(burst)),
        None => (NO_LIMIT, NO_LIMIT as u64),
    }
}

/// The variable the providers pointed at the sim take their key from;
/// its value is set in the config's secrets, not the environment.
pub const SIM_KEY_VAR: &str = "SLUICE_SIM_KEY";

/// The embedded defaults pointed at the sim at `sim_url`: each provider
/// the sim serves at `{sim}/{provider}/v1`, each API at `{sim}/{api}`,
/// with the gateway's limits equal to the sim's (see [`exact`]), a key
/// for the sim ([`SIM_KEY_VAR`]), and data (traces) under `data_dir`.
pub fn gateway_config(sim_url: &str, sim: &SimConfig, data_dir: PathBuf) -> Config {
    let mut config = Config {
        data_dir,
        ..Config::default()
    };
    config.shutdown.drain_timeout_ms = 1_000;
    // The demo and the benches send no jobs: no job store, no workers
    // polling it, no `jobs:` resources in the live view.
    config.jobs.enabled = false;
    config.secrets.insert(SIM_KEY_VAR, "sk-sim-local");
    for p in &mut config.providers {
        if let Some(limits) = sim.providers.get(&p.name).map(|s| s.limits) {
            p.base_url = format!("{sim_url}/{}/v1", p.name);
            // The sim wants a key as the providers do; any will do.
            p.api_key_env = Some(SIM_KEY_VAR.to_owned());
            let prefix = format!("{}/", p.name);
            let (rate, burst) = exact(limits.rate_and_burst());
            config.models.retain(|m| m.prefix != prefix);
            config.models.push(ModelLimits {
                prefix,
                requests_per_second: rate,
                burst,
                tokens_per_minute: None,
                max_in_flight: None,
                guess: false,
            });
        }
    }
    for a in &mut config.apis {
        if let Some(limits) = sim.apis.get(&a.name).map(|s| s.limits) {
            a.base_url = format!("{sim_url}/{}", a.name);
            let (rate, burst) = exact(limits.rate_and_burst());
            a.requests_per_second = rate;
            a.burst = burst;
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_limits_match_the_sims() {
        let sim = SimConfig::default();
        let c = gateway_config("http://127.0.0.1:9", &sim, PathBuf::from("/tmp/x"));
        let openai = c.providers.iter().find(|p| p.name == "openai").unwrap();
        assert_eq!(openai.base_url, "http://127.0.0.1:9/openai/v1");
        assert_eq!(openai.api_key_env.as_deref(), Some(SIM_KEY_VAR));
        assert!(c.secrets.get(SIM_KEY_VAR).is_some());
        let limit = |prefix: &str| {
            let m = c.models.iter().find(|m| m.prefix == prefix).unwrap();
            (m.requests_per_second, m.burst)
        };
        assert_eq!(limit("openai/"), (3.0, 10));
        assert_eq!(limit("anthropic/"), (2.0, 8));
        assert_eq!(limit("google/"), (5.0, 15));
        let slack = c.api("slack").unwrap();
        assert_eq!(slack.base_url, "http://127.0.0.1:9/slack");
        assert_eq!((slack.requests_per_second, slack.burst), (3.0, 10));

        let off = gateway_config("http://s", &SimConfig::unlimited(), PathBuf::new());
        let m = off.models.iter().find(|m| m.prefix == "openai/").unwrap();
        assert_eq!(m.requests_per_second, NO_LIMIT);
    }
}
