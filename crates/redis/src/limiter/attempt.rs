//! One try at Redis (or a leased block), what a refusal means, and the
//! local share while Redis is away.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sluice_limit::Error;
use tokio::time::Instant;

use super::{Inner, MAP_BOUND, lock};
use crate::batch::{Kind, Part, Reply, Spec};
use crate::config::{Failure, Mode};
use crate::grant::{Held, RedisGrant};

/// Why one attempt did not grant.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Not now: `wait` is exact when `known`, an upper bound otherwise.
    Wait {
        resource: String,
        wait: Duration,
        known: bool,
    },
    /// Never, or not at all (unknown resource, closed).
    Fatal(Error),
    /// Redis is away.
    Down,
}

/// The longest wait reported: a year.
const MAX_WAIT_US: u64 = 365 * 24 * 3600 * 1_000_000;

/// How long a waiter trusts a refusal whose end is not known (an in-flight
/// slot comes back when another replica releases it, not at a time) before
/// asking Redis again. The release notice normally wakes it at once, but
/// Redis pub/sub delivers at most once: a notice lost to a reconnect, or
/// published before this replica's subscription was up, must not hold a
/// waiter until the holder's lease expires. A wait for another replica's
/// fair share (kind 3 in `ops.lua`) is an estimate too: shares move as
/// replicas come and go.
const UNKNOWN_RECHECK: Duration = Duration::from_millis(250);

impl Refusal {
    pub(super) fn into_error(self) -> Error {
        match self {
            Refusal::Wait {
                resource,
                wait,
                known,
            } => Error::RateLimited {
                resource,
                retry_after: known.then_some(wait),
            },
            Refusal::Fatal(e) => e,
            Refusal::Down => Error::Closed,
        }
    }
}

impl Inner {
    /// The specs of `needs`, a resource named twice taken once at the sum
    /// of its costs.
    pub(super) fn needs(&self, needs: &[(&str, u64)]) -> Result<Vec<(Arc<Spec>, u64)>, Error> {
        let mut out: Vec<(Arc<Spec>, u64)> = Vec::with_capacity(needs.len());
        for (r, cost) in needs {
            match out.iter_mut().find(|(s, _)| s.name == *r) {
                Some((_, c)) => *c = c.saturating_add(*cost),
                None => out.push((self.spec(r)?, *cost)),
            }
        }
        for (spec, cost) in &out {
            if *cost > spec.limit.max_cost() {
                return Err(Error::InsufficientCapacity {
                    resource: spec.name.clone(),
                    cost: *cost,
                    capacity: spec.limit.max_cost(),
                });
            }
        }
        Ok(out)
    }

    /// Closed, Redis away, or a refusal still in the deny cache.
    pub(super) fn precheck(&self, needs: &[(Arc<Spec>, u64)]) -> Result<(), Refusal> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refusal::Fatal(Error::Closed));
        }
        if self.conn.is_degraded() {
            return Err(Refusal::Down);
        }
        {
            let now = Instant::now();
            let deny = lock(&self.deny);
            for (spec, cost) in needs {
                if let Some((until, denied)) = deny.get(&spec.name)
                    && *until > now
                    && cost >= denied
                {
                    return Err(Refusal::Wait {
                        resource: spec.name.clone(),
                        wait: *until - now,
                        known: spec.algo() != 4,
                    });
                }
            }
        }
        Ok(())
    }

    /// One try for the head of a line that no line's lease serves (a
    /// line of one, or of several resources): in leased mode the head
    /// refills the block for waiters queued.
    pub(super) async fn attempt_alone(
        self: &Arc<Self>,
        needs: &[(Arc<Spec>, u64)],
    ) -> Result<RedisGrant, Refusal> {
        if let [(spec, _)] = needs
            && self.cfg.mode == Mode::Leased
            && spec.leasable()
        {
            self.precheck(needs)?;
            return crate::leased::attempt(self, needs, true).await;
        }
        self.attempt(needs).await
    }

    /// One try: the deny cache, then a leased block or Redis.
    pub(crate) async fn attempt(
        self: &Arc<Self>,
        needs: &[(Arc<Spec>, u64)],
    ) -> Result<RedisGrant, Refusal> {
        self.precheck(needs)?;
        if self.cfg.mode == Mode::Leased && needs.iter().all(|(s, _)| s.leasable()) {
            return crate::leased::attempt(self, needs, false).await;
        }
        let parts: Vec<Part> = needs
            .iter()
            .map(|(spec, cost)| Part {
                spec: spec.clone(),
                cost: *cost,
                member: self.member(spec, *cost),
                weight: if spec.leasable() {
                    self.weight(&spec.name)
                } else {
                    1
                },
            })
            .collect();
        let r = self
            .request(Kind::Acquire(parts.clone()))
            .await
            .map_err(|_| Refusal::Down)?;
        if r[0] == 1 {
            let held: Vec<Held> = parts
                .into_iter()
                .map(|p| Held {
                    spec: p.spec,
                    reserved: p.cost,
                    member: p.member,
                })
                .collect();
            {
                let mut leases = self.held_leases();
                for h in &held {
                    if h.spec.algo() == 4 {
                        leases.insert(h.member.clone(), h.spec.clone());
                    }
                }
            }
            return Ok(RedisGrant {
                inner: self.clone(),
                parts: held,
                local: None,
            });
        }
        Err(self.refused(needs, r))
    }

    /// A refusal from a reply `[0, wait_us, idx, kind]`, remembered in the
    /// deny cache until the wait has passed.
    pub(crate) fn refused(&self, needs: &[(Arc<Spec>, u64)], r: Reply) -> Refusal {
        // The batcher turned the script's resource number into the part's.
        let i = usize::try_from(r[2]).unwrap_or(1).saturating_sub(1);
        let Some((spec, cost)) = needs.get(i).or(needs.first()).cloned() else {
            return Refusal::Fatal(Error::UnknownResource(String::new()));
        };
        if r[3] == 1 {
            return Refusal::Fatal(Error::InsufficientCapacity {
                resource: spec.name.clone(),
                cost,
                capacity: spec.limit.max_cost(),
            });
        }
        // Capped, so that no instant arithmetic can overflow on a limit of
        // one per century.
        let wait = Duration::from_micros(u64::try_from(r[1]).unwrap_or(0).clamp(1, MAX_WAIT_US));
        let known = r[3] == 0;
        let wait = if known {
            wait
        } else {
            wait.min(UNKNOWN_RECHECK)
        };
        let mut deny = lock(&self.deny);
        if deny.len() >= MAP_BOUND {
            let now = Instant::now();
            deny.retain(|_, (until, _)| *until > now);
        }
        deny.insert(spec.name.clone(), (Instant::now() + wait, cost));
        Refusal::Wait {
            resource: spec.name.clone(),
            wait,
            known,
        }
    }

    /// Redis is away: the local share (fail open) or a refusal (fail
    /// closed).
    pub(super) async fn fallback(
        self: &Arc<Self>,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        match self.cfg.failure {
            Failure::FailClosed => Err(Error::RateLimited {
                resource: needs.first().map(|n| n.0.to_owned()).unwrap_or_default(),
                retry_after: Some(Duration::from_secs(1)),
            }),
            Failure::FailOpen => {
                let g = match deadline {
                    Some(_) => self.local.acquire_many(needs, deadline).await?,
                    None => self.local.try_acquire_many(needs)?,
                };
                Ok(RedisGrant {
                    inner: self.clone(),
                    parts: Vec::new(),
                    local: Some(g),
                })
            }
        }
    }
}
