//! A swarm's settings: how many agents in how many tenants, for how
//! long, and the retry loop they use.

use std::time::Duration;

use super::{MAX_AGENTS, MAX_DURATION, Mode, Workload};
use crate::Error;

/// The agents' own retry loop: up to `max_retries` more tries after a
/// 429, a 5xx or a transport error, sleeping for the answer's Retry-After
/// when it gives one, else `initial · 2^(n−1)` (±25%, at most `max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Tries after the first.
    pub max_retries: u32,
    /// The first backoff without a Retry-After.
    pub initial: Duration,
    /// The longest backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// Three retries from 0.5 s up to 8 s, as the OpenAI SDKs do (they
    /// default to two).
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The sleep before try `attempt + 1`.
    pub(crate) fn wait(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        rng: &mut fastrand::Rng,
    ) -> Duration {
        if let Some(r) = retry_after {
            return r.min(self.max);
        }
        let exp = self
            .initial
            .saturating_mul(1 << attempt.saturating_sub(1).min(20));
        exp.min(self.max).mul_f64(0.75 + rng.f64() * 0.5)
    }
}

/// A swarm to run.
#[derive(Debug, Clone)]
pub struct SwarmConfig {
    /// The sim's or the gateway's URL, `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// Further gateway replicas: each call goes to one of `base_url` and
    /// these, picked at random, as a load balancer would.
    pub replicas: Vec<String>,
    /// Each tenant's calls all go to one replica instead (tenant `i` to
    /// replica `i mod n`), as a load balancer that routes by tenant does.
    pub tenant_per_replica: bool,
    /// Which of the two it is.
    pub mode: Mode,
    /// What the agents call.
    pub workload: Workload,
    /// Agents in all.
    pub agents: usize,
    /// Tenants (`tenant-1` …), sent as `x-sluice-workspace`.
    pub tenants: usize,
    /// How many times the agents of the first tenant outnumber each other
    /// tenant's: 1 splits them evenly, 2 makes `tenant-1` a noisy
    /// neighbour with twice the agents of each other.
    pub noisy_factor: usize,
    /// How long the agents run.
    pub duration: Duration,
    /// The agents' retry loop.
    pub retry: RetryPolicy,
    /// One request's timeout.
    pub request_timeout: Duration,
    /// Seed of every random choice.
    pub seed: u64,
    /// Tool calls (the API targets) as MCP `tools/call`s at `{base}/mcp`
    /// instead of HTTP calls of the API.
    pub tools_over_mcp: bool,
}

impl SwarmConfig {
    /// 100 agents in 4 even tenants for 10 s with the default retry loop.
    pub fn new(base_url: impl Into<String>, mode: Mode, workload: Workload) -> Self {
        SwarmConfig {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            replicas: Vec::new(),
            tenant_per_replica: false,
            mode,
            workload,
            agents: 100,
            tenants: 4,
            noisy_factor: 1,
            duration: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(60),
            seed: 1,
            tools_over_mcp: false,
        }
    }

    /// Making tool calls over MCP (see [`SwarmConfig::tools_over_mcp`]).
    pub fn tools_over_mcp(mut self, on: bool) -> Self {
        self.tools_over_mcp = on;
        self
    }

    /// Spreading calls over `base_url` and `urls` (more gateway replicas).
    pub fn replicas(mut self, urls: impl IntoIterator<Item = String>) -> Self {
        self.replicas = urls
            .into_iter()
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect();
        self
    }

    /// Routing each tenant's calls to one replica (see
    /// [`SwarmConfig::tenant_per_replica`]).
    pub fn tenant_per_replica(mut self, on: bool) -> Self {
        self.tenant_per_replica = on;
        self
    }

    /// With `n` agents.
    pub fn agents(mut self, n: usize) -> Self {
        self.agents = n;
        self
    }

    /// With `n` tenants.
    pub fn tenants(mut self, n: usize) -> Self {
        self.tenants = n;
        self
    }

    /// Running for `d`.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = d;
        self
    }

    /// With the first tenant running `factor` times the agents of each
    /// other.
    pub fn noisy_factor(mut self, factor: usize) -> Self {
        self.noisy_factor = factor;
        self
    }

    /// Agents per tenant: the first has `noisy_factor` shares, the others
    /// one each, split by largest remainder.
    pub fn split(&self) -> Vec<usize> {
        let shares: Vec<usize> = (0..self.tenants)
            .map(|t| if t == 0 { self.noisy_factor } else { 1 })
            .collect();
        let total: usize = shares.iter().sum();
        let mut split: Vec<usize> = shares.iter().map(|s| self.agents * s / total).collect();
        let mut order: Vec<usize> = (0..self.tenants).collect();
        order.sort_by_key(|&t| std::cmp::Reverse((self.agents * shares[t]) % total));
        let left = self.agents - split.iter().sum::<usize>();
        for &t in order.iter().take(left) {
            split[t] += 1;
        }
        split
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        if !(1..=MAX_AGENTS).contains(&self.agents) {
            return Err(Error::invalid(
                "agents",
                format!("must be 1 to {MAX_AGENTS}"),
            ));
        }
        if !(1..=self.agents).contains(&self.tenants) {
            return Err(Error::invalid(
                "tenants",
                "must be 1 to the number of agents",
            ));
        }
        if self.noisy_factor == 0 || self.noisy_factor > MAX_AGENTS {
            return Err(Error::invalid("noisy_factor", "must be at least 1"));
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(Error::invalid(
                "duration",
                "must be more than 0 and at most an hour",
            ));
        }
        if self.workload.models.is_empty() {
            return Err(Error::invalid(
                "workload.models",
                "must name at least one model",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(agents: usize, tenants: usize, noisy: usize) -> SwarmConfig {
        SwarmConfig::new(
            "http://x",
            Mode::Direct,
            Workload::single_model("openai", "m", Default::default()),
        )
        .agents(agents)
        .tenants(tenants)
        .noisy_factor(noisy)
    }

    #[test]
    fn split_gives_the_noisy_tenant_its_factor() {
        assert_eq!(config(200, 5, 1).split(), [40, 40, 40, 40, 40]);
        let s = config(200, 5, 2).split();
        assert_eq!(s.iter().sum::<usize>(), 200);
        assert!(
            s[0] >= 66 && s[1..].iter().all(|&n| n == 33 || n == 34),
            "{s:?}"
        );
        assert_eq!(config(20, 2, 1).split(), [10, 10]);
        assert_eq!(config(7, 3, 1).split().iter().sum::<usize>(), 7);
    }

    #[test]
    fn bad_settings_are_named() {
        let err = |c: SwarmConfig| c.check().unwrap_err().to_string();
        assert!(err(config(0, 1, 1)).contains("agents"));
        assert!(err(config(3, 4, 1)).contains("tenants"));
        assert!(err(config(3, 1, 0)).contains("noisy_factor"));
        assert!(err(config(3, 1, 1).duration(Duration::ZERO)).contains("duration"));
    }

    #[test]
    fn backoff_honours_retry_after_then_doubles() {
        let p = RetryPolicy::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let r = Some(Duration::from_millis(300));
        assert_eq!(p.wait(1, r, &mut rng), Duration::from_millis(300));
        assert_eq!(p.wait(1, Some(Duration::from_secs(60)), &mut rng), p.max);
        for (attempt, base) in [(1, 500), (2, 1_000), (3, 2_000), (9, 8_000)] {
            let w = p.wait(attempt, None, &mut rng).as_millis() as u64;
            assert!((base * 3 / 4..=base * 5 / 4).contains(&w), "{attempt}: {w}");
        }
    }
}
