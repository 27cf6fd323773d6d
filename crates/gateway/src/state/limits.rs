//! [`Limits`]: where the request path's and the job workers' limits live
//! (the in-process limiter, or Redis with `[redis]`), the grants held for
//! callers of the limiter API and what their reports did.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sluice_limit::{Limiter, SharedLimiter, ToolClassifier};
use sluice_redis::RedisLimiter;

use crate::config::Config;
use crate::error::StartError;
use crate::limits::holds::Holds;
use crate::limits::reports::Reports;
use crate::limits::rules::{adaptive, capacity_changed, rules};

/// The limits substate.
#[derive(Debug)]
pub(crate) struct Limits {
    /// The in-process limiter (the shared one without `[redis]`).
    pub(crate) limiter: Limiter,
    /// Where the request path's (and the job workers') limits live:
    /// `limiter` itself, or Redis when `[redis]` is configured.
    pub(crate) shared: SharedLimiter,
    /// The shared limiter with `[redis]`, for what only it has (its
    /// health, the capacity bus); `shared` is the same one.
    pub(crate) redis: Option<RedisLimiter>,
    /// Grants held for callers of the limiter API.
    pub(crate) holds: Holds,
    /// What tenants' reports to the limiter API did, for corroboration
    /// and their own pauses.
    pub(crate) reports: Reports,
    /// Which API a tool call's name belongs to.
    pub(crate) tools: ToolClassifier,
    /// The capacity pools: each deployment's circuit (shared with the
    /// other replicas through `redis`) and calls in flight.
    pub(crate) pools: crate::pools::Pools,
}

impl Limits {
    /// The limits `config` sets, shared through `redis` when given. The
    /// limiter's maintenance and the holds' expiry run on the current
    /// runtime until the substate is dropped.
    ///
    /// # Errors
    /// [`StartError::Limits`] for a limit the limiter cannot use.
    pub(crate) fn build(
        config: &Config,
        redis: Option<RedisLimiter>,
    ) -> Result<Arc<Limits>, StartError> {
        let limiter = Limiter::builder()
            .rules(rules(config))
            .adaptive(adaptive(config))
            .build()?;
        let shared: SharedLimiter = match &redis {
            Some(r) => Arc::new(r.clone()),
            None => limiter.clone().into(),
        };
        limiter.spawn_maintenance(Duration::from_secs(1));
        limiter.on_change(capacity_changed);
        let mut tools = ToolClassifier::new();
        for api in &config.apis {
            for prefix in &api.tool_prefixes {
                tools = tools.with(prefix.clone(), api.name.clone());
            }
        }
        let pools = crate::pools::Pools::new(config, redis.as_ref());
        let limits = Arc::new(Limits {
            limiter,
            shared,
            redis,
            holds: Holds::new(
                config.limits_api.max_held_per_tenant,
                config.limits_api.max_settle_multiple,
            ),
            reports: Reports::default(),
            tools,
            pools,
        });
        // Grants held for the limiter API are released once their TTL
        // passes, whether or not anyone asks for another; the task ends
        // with the substate.
        tokio::spawn(expire_holds(Arc::downgrade(&limits)));
        Ok(limits)
    }
}

async fn expire_holds(limits: Weak<Limits>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        match limits.upgrade() {
            Some(limits) => limits.holds.expire(),
            None => break,
        }
    }
}
