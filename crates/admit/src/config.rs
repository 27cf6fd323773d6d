//! Queue configuration. The defaults reproduce the seed's request queue.

use std::collections::BTreeMap;
use std::num::{NonZeroU32, NonZeroUsize};

use serde::{Deserialize, Serialize};

/// How the admission queue is sized.
///
/// Zero limits cannot be written ([`NonZeroUsize`]); loaded from TOML, an
/// unknown key is an error that names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Entries one tenant (workspace) may have queued. Seed: 50, so one
    /// workspace cannot take the whole queue.
    pub max_depth_per_tenant: NonZeroUsize,
    /// Entries queued in all. Seed: 200, the global backpressure limit.
    pub max_depth_total: NonZeroUsize,
    /// Admitted requests running at once, per lane (see
    /// [`Ticket::lane`](crate::Ticket::lane)). Seed: 10 workers. The queue
    /// is *busy* when more than twice this many entries wait per lane with
    /// entries waiting.
    pub concurrency: NonZeroUsize,
    /// The starvation guard: a class with entries queued is passed over by
    /// higher classes at most this many dispatches in a row; `None` is pure
    /// strict priority. Default 9: under a flood of `High`, `Low` still gets
    /// one dispatch in ten, and `High` keeps at least 80% with every class
    /// backlogged.
    pub starvation_guard: Option<NonZeroU32>,
    /// Per-tenant weights for fair queuing inside a class.
    pub weights: Weights,
}

impl QueueConfig {
    /// The seed's numbers: 50 per tenant, 200 in all, 10 running at once.
    pub const SEED: QueueConfig = QueueConfig {
        max_depth_per_tenant: NonZeroUsize::new(50).unwrap(),
        max_depth_total: NonZeroUsize::new(200).unwrap(),
        concurrency: NonZeroUsize::new(10).unwrap(),
        starvation_guard: Some(NonZeroU32::new(9).unwrap()),
        weights: Weights::UNIFORM,
    };

    /// The backlog per lane with entries waiting above which the queue
    /// reports busy: twice the concurrency.
    pub fn busy_threshold(&self) -> usize {
        self.concurrency.get().saturating_mul(2)
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig::SEED
    }
}

/// Per-tenant weights: a backlogged tenant with weight `w` gets `w / Σw` of
/// its class's dispatches, where the sum runs over the tenants with entries
/// queued in that class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    /// The weight of a tenant not listed. Default 1.
    pub default: NonZeroU32,
    /// Weights by tenant name.
    pub tenants: BTreeMap<String, NonZeroU32>,
}

impl Weights {
    /// Every tenant weighs 1.
    pub const UNIFORM: Weights = Weights {
        default: NonZeroU32::MIN,
        tenants: BTreeMap::new(),
    };

    /// These weights, with `tenant` weighing `weight`.
    pub fn with(mut self, tenant: impl Into<String>, weight: NonZeroU32) -> Self {
        self.tenants.insert(tenant.into(), weight);
        self
    }

    /// The weight `tenant` is served with.
    pub fn of(&self, tenant: &str) -> NonZeroU32 {
        self.tenants.get(tenant).copied().unwrap_or(self.default)
    }
}

impl Default for Weights {
    fn default() -> Self {
        Weights::UNIFORM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seed() {
        let c = QueueConfig::default();
        assert_eq!(c.max_depth_per_tenant.get(), 50);
        assert_eq!(c.max_depth_total.get(), 200);
        assert_eq!(c.concurrency.get(), 10);
        assert_eq!(c.busy_threshold(), 20);
        assert_eq!(c.weights.of("anyone").get(), 1);
    }

    #[test]
    fn weights_fall_back_to_the_default() {
        let w = Weights::default().with("acme", NonZeroU32::new(3).unwrap());
        assert_eq!(w.of("acme").get(), 3);
        assert_eq!(w.of("other").get(), 1);
    }

    #[test]
    fn loads_with_defaults_and_names_unknown_keys() {
        let c: QueueConfig =
            serde_json::from_str(r#"{"concurrency": 4, "weights": {"tenants": {"acme": 3}}}"#)
                .unwrap();
        assert_eq!(c.concurrency.get(), 4);
        assert_eq!(c.max_depth_total.get(), 200);
        assert_eq!(c.weights.of("acme").get(), 3);

        let err = serde_json::from_str::<QueueConfig>(r#"{"workers": 4}"#).unwrap_err();
        assert!(err.to_string().contains("workers"), "{err}");
        let err = serde_json::from_str::<QueueConfig>(r#"{"concurrency": 0}"#).unwrap_err();
        assert!(err.to_string().contains("nonzero"), "{err}");
    }
}
