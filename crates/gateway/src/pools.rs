//! Capacity pools at run time: each deployment's circuit and calls in
//! flight, and the choice of the deployment a call goes to ([`Pools::choose`]),
//! made from the deployments' own limiter answers. The layer that sends a
//! pooled call, and sends it elsewhere when a deployment fails, is
//! `layers/pool.rs`.

mod circuit;
mod shared;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_limit::{Capacity, SharedLimiter};
use sluice_redis::{ProbeClaim, RedisLimiter};
use tokio::time::Instant;

use crate::config::{Config, Strategy};
use crate::dashboard::view::{DeploymentView, PoolView};

pub(crate) use circuit::{Admit, Circuit};
use shared::SharedCircuits;

/// The pools of a configuration, in `config.pools`' order.
#[derive(Debug, Default)]
pub(crate) struct Pools {
    pools: Vec<Pool>,
}

/// One pool.
#[derive(Debug)]
pub(crate) struct Pool {
    /// The name clients call.
    pub(crate) model: String,
    strategy: Strategy,
    pub(crate) deployments: Vec<Arc<DeploymentState>>,
    /// With `[redis]`: the circuits' state shared by every replica.
    shared: Option<SharedCircuits>,
    /// The longest a probe is held for this replica (another may take
    /// it after this): the longest an attempt may take.
    probe_ttl: Duration,
}

/// One deployment's live state.
#[derive(Debug)]
pub(crate) struct DeploymentState {
    /// Its pool's model.
    pool: String,
    /// Its limiter resource (`deployment:{provider}/{model}`).
    pub(crate) resource: String,
    /// Its provider's index in `config.providers`.
    pub(crate) provider: usize,
    /// Its provider's name.
    pub(crate) provider_name: String,
    /// The model's name upstream.
    pub(crate) upstream_model: String,
    /// Whether it has a tokens-per-minute limit, and an in-flight one.
    pub(crate) tokens_limited: bool,
    pub(crate) in_flight_limited: bool,
    weight: u32,
    /// Calls sent to it and not yet answered.
    in_flight: AtomicU64,
    /// Calls it answered, and calls that failed on it.
    pub(crate) served: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) circuit: Circuit,
}

/// A deployment a call may go to, as the choice sees it.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    index: usize,
    wait: Duration,
    probe: bool,
    load: f64,
    weight: u32,
}

/// The deployment chosen for a call, and whether the call is its circuit's
/// probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chosen {
    pub(crate) index: usize,
    pub(crate) probe: bool,
}

/// Why no deployment can take a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllOpen {
    /// When the first circuit lets a probe through.
    pub(crate) retry_in: Duration,
}

impl Pools {
    /// The pools `config` sets (its checks passed: every deployment's
    /// provider exists), their circuits shared through `redis` when given.
    pub(crate) fn new(config: &Config, redis: Option<&RedisLimiter>) -> Pools {
        let mut pools: Vec<Pool> = config
            .pools
            .iter()
            .map(|p| Pool {
                model: p.model.clone(),
                strategy: p.strategy,
                deployments: p
                    .deployments
                    .iter()
                    .map(|d| {
                        Arc::new(DeploymentState {
                            pool: p.model.clone(),
                            resource: d.resource(&p.model),
                            provider: config.provider_named(&d.provider).unwrap_or(0),
                            provider_name: d.provider.clone(),
                            upstream_model: d.upstream_model(&p.model).to_owned(),
                            tokens_limited: d.tokens_per_minute.is_some(),
                            in_flight_limited: d.max_in_flight.is_some(),
                            weight: d.weight.max(1),
                            in_flight: AtomicU64::new(0),
                            served: AtomicU64::new(0),
                            failed: AtomicU64::new(0),
                            circuit: Circuit::new(
                                p.failures_to_open.max(1),
                                Duration::from_millis(p.open_ms),
                            ),
                        })
                    })
                    .collect(),
                shared: None,
                probe_ttl: Duration::from_millis(config.retry.attempt_timeout_ms.max(p.open_ms)),
            })
            .collect();
        if let Some(redis) = redis {
            let all = pools.iter().flat_map(|p| p.deployments.iter().cloned());
            let shared = SharedCircuits::start(redis.clone(), all.collect());
            for p in &mut pools {
                p.shared = Some(shared.clone());
            }
        }
        Pools { pools }
    }

    /// The pool at `index` in `config.pools`.
    pub(crate) fn get(&self, index: usize) -> Option<&Pool> {
        self.pools.get(index)
    }

    /// Every pool's deployments as `GET /v1/limits` and the dashboard
    /// show them: circuit, calls in flight, calls answered and failed
    /// (its limits are among the resources, under the deployment's
    /// resource name).
    pub(crate) fn views(&self) -> Vec<PoolView> {
        let now = Instant::now();
        self.pools
            .iter()
            .map(|p| PoolView {
                model: p.model.clone(),
                strategy: p.strategy.as_str().to_owned(),
                deployments: p
                    .deployments
                    .iter()
                    .map(|d| DeploymentView {
                        provider: d.provider_name.clone(),
                        model: d.upstream_model.clone(),
                        resource: d.resource.clone(),
                        weight: d.weight,
                        circuit: d.circuit.state(now).as_str().to_owned(),
                        in_flight: d.in_flight.load(Ordering::Relaxed),
                        served: d.served.load(Ordering::Relaxed),
                        failed: d.failed.load(Ordering::Relaxed),
                    })
                    .collect(),
            })
            .collect()
    }
}

impl Pool {
    /// The deployment a call should go to: among those `eligible` (the
    /// route's format, not yet failed for this call), a circuit's due
    /// probe first; then, with `fill`, the one whose limiter can take the
    /// call soonest, the least loaded for its weight among equals, and a
    /// draw by weight among those equal still; with `ordered`, the first
    /// in order that can take it now, else the soonest.
    ///
    /// # Errors
    /// [`AllOpen`] when every eligible deployment's circuit is open.
    pub(crate) async fn choose(
        &self,
        limiter: &SharedLimiter,
        eligible: impl Fn(usize) -> bool,
    ) -> Result<Chosen, AllOpen> {
        let now = Instant::now();
        let mut candidates: Vec<Candidate> = Vec::with_capacity(self.deployments.len());
        let mut retry_in: Option<Duration> = None;
        for (index, d) in self.deployments.iter().enumerate() {
            if !eligible(index) {
                continue;
            }
            let probe = match d.circuit.admits(now) {
                Admit::Yes => false,
                Admit::Probe => true,
                Admit::NotFor(wait) => {
                    retry_in = Some(retry_in.map_or(wait, |r| r.min(wait)));
                    continue;
                }
            };
            let wait = match limiter.get_capacity(&d.resource).await {
                Ok(c) => wait_of(&c),
                // A limiter that cannot answer (Redis away): no reason to
                // prefer or avoid this deployment.
                Err(_) => Duration::ZERO,
            };
            let load = d.in_flight.load(Ordering::Relaxed) as f64 / f64::from(d.weight);
            candidates.push(Candidate {
                index,
                wait,
                probe,
                load,
                weight: d.weight,
            });
        }
        loop {
            if candidates.is_empty() {
                return Err(AllOpen {
                    retry_in: retry_in.unwrap_or(Duration::from_secs(1)),
                });
            }
            let pick = pick(self.strategy, &candidates);
            // Taken now, so that no other call takes the same probe; one
            // taken by another call first leaves the deployment out.
            let d = &self.deployments[pick.index];
            if pick.probe && !d.circuit.take_probe(now) {
                candidates.retain(|c| c.index != pick.index);
                let soon = Duration::from_millis(100);
                retry_in = Some(retry_in.map_or(soon, |r| r.min(soon)));
                continue;
            }
            // With `[redis]`, one replica probes: one that finds another
            // probing, or the circuit opened again elsewhere, keeps it
            // open here until the verdict's notice (or, at the latest,
            // for its open time, then asks again).
            if let (true, Some(shared)) = (pick.probe, &self.shared)
                && let ProbeClaim::Open(left) | ProbeClaim::Probing(left) =
                    shared.claim(d, self.probe_ttl).await
            {
                let left = left.min(d.circuit.open_time());
                d.circuit.open_until(Instant::now() + left);
                candidates.retain(|c| c.index != pick.index);
                retry_in = Some(retry_in.map_or(left, |r| r.min(left)));
                continue;
            }
            return Ok(Chosen {
                index: pick.index,
                probe: pick.probe,
            });
        }
    }

    /// A call goes to deployment `index`: counted in flight until the
    /// guard is dropped, which counts the outcome reported to it.
    pub(crate) fn enter(&self, chosen: Chosen) -> InFlight {
        let d = self.deployments[chosen.index].clone();
        d.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            deployment: d,
            probe: chosen.probe,
            outcome: None,
            shared: self.shared.clone(),
        }
    }
}

/// The choice among `candidates` (not empty) by `strategy`.
fn pick(strategy: Strategy, candidates: &[Candidate]) -> Candidate {
    // A due probe goes first: a recovered deployment comes back only
    // through one.
    if let Some(probe) = candidates.iter().find(|c| c.probe) {
        return *probe;
    }
    // Waits closer than a millisecond are equal: the estimates are not
    // finer than that.
    let ms = |c: &Candidate| c.wait.as_millis();
    match strategy {
        Strategy::Ordered => *candidates
            .iter()
            .find(|c| c.wait.is_zero())
            .unwrap_or_else(|| {
                candidates
                    .iter()
                    .min_by_key(|c| ms(c))
                    .unwrap_or(&candidates[0])
            }),
        Strategy::Fill => {
            let soonest = candidates.iter().map(ms).min().unwrap_or(0);
            let ready: Vec<&Candidate> = candidates.iter().filter(|c| ms(c) == soonest).collect();
            let least = ready.iter().map(|c| c.load).fold(f64::INFINITY, f64::min);
            let equal: Vec<&&Candidate> = ready
                .iter()
                .filter(|c| c.load <= least + f64::EPSILON)
                .collect();
            let total: u64 = equal.iter().map(|c| u64::from(c.weight)).sum();
            let mut draw = fastrand::u64(0..total.max(1));
            for c in &equal {
                let w = u64::from(c.weight);
                if draw < w {
                    return ***c;
                }
                draw -= w;
            }
            **equal[0]
        }
    }
}

/// How long a new call would wait for `c`: the calls queued before it
/// and itself, less what is there now, at the rate in force; at least
/// the pause a Retry-After set.
pub(crate) fn wait_of(c: &Capacity) -> Duration {
    let per_second = c.total as f64 / c.window.as_secs_f64().max(1e-9);
    let short = (c.waiting as f64 + 1.0) - c.available;
    let refill = if short <= 0.0 || per_second <= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64((short / per_second).min(86_400.0))
    };
    refill.max(c.paused_for.unwrap_or_default())
}

/// How a call on a deployment ended, for its circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An answer (any the client is to see: 2xx, 4xx).
    Answered,
    /// A 5xx, a timeout, a refused connection, a 200 that is not an
    /// answer: the deployment is failing.
    Failed,
    /// Neither: throttled (its limiter paces it), refused before it was
    /// sent, or cancelled.
    Neither,
}

/// A call on a deployment (see [`Pool::enter`]).
#[derive(Debug)]
pub(crate) struct InFlight {
    deployment: Arc<DeploymentState>,
    probe: bool,
    outcome: Option<Outcome>,
    shared: Option<SharedCircuits>,
}

impl InFlight {
    /// How the call ended.
    pub(crate) fn ended(mut self, outcome: Outcome) {
        self.outcome = Some(outcome);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let d = &self.deployment;
        d.in_flight.fetch_sub(1, Ordering::Relaxed);
        let outcome = self.outcome.unwrap_or(Outcome::Neither);
        let now = Instant::now();
        // What the other replicas learn: a verdict (opened, closed), or
        // a probe of this replica's that gave none, given back.
        let (opened, closed) = match outcome {
            Outcome::Answered => {
                d.served.fetch_add(1, Ordering::Relaxed);
                (false, d.circuit.succeeded(self.probe))
            }
            Outcome::Failed => {
                d.failed.fetch_add(1, Ordering::Relaxed);
                (d.circuit.failed(now, self.probe), false)
            }
            // A probe that proved nothing (cancelled, throttled) is given
            // back for another call to make.
            Outcome::Neither => {
                d.circuit.released(self.probe);
                (false, false)
            }
        };
        if let Some(shared) = &self.shared {
            if opened {
                shared.opened(d);
            } else if closed {
                shared.closed(d);
            } else if self.probe {
                shared.released(d);
            }
        }
        let open = d.circuit.state(now) != circuit::CircuitState::Closed;
        crate::metrics::pool_circuit(&d.pool, &d.resource, open);
    }
}

#[cfg(test)]
#[path = "pools/tests.rs"]
mod tests;
