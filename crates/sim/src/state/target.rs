//! One model or API as the sim tracks it, made on first use from the
//! configuration.

use std::collections::HashMap;

use tokio::time::Instant;

use super::{Ask, Kind, MAX_TARGETS};
use crate::config::{Faults, Latency, Limits, SimConfig};
use crate::faults::FaultState;
use crate::quota::Quota;
use crate::stats::Counters;

#[derive(Debug)]
pub(super) struct Target {
    pub limits: Limits,
    pub quota: Quota,
    pub faults: FaultState,
    pub latency: Latency,
    pub output_tokens: u32,
    pub counters: Counters,
}

/// The target an ask names, made on first use from the configuration;
/// `None` once [`MAX_TARGETS`] are tracked or for an API not configured.
pub(super) fn target<'a>(
    map: &'a mut HashMap<String, Target>,
    config: &SimConfig,
    fault_override: Option<&Faults>,
    ask: &Ask<'_>,
    now: Instant,
) -> Option<&'a mut Target> {
    if !map.contains_key(ask.name) {
        if map.len() >= MAX_TARGETS {
            return None;
        }
        let mut made = match ask.kind {
            Kind::Model => {
                let s = config.model_settings(ask.name, ask.provider);
                let mut t = Target::new(s.limits, s.faults, s.latency, s.output_tokens, now);
                t.counters.provider = s.provider;
                t
            }
            Kind::Api => {
                let a = config.apis.get(ask.name)?;
                let latency = Latency {
                    base_ms: a.latency_ms,
                    ..Latency::default()
                };
                Target::new(a.limits, a.faults.clone(), latency, 0, now)
            }
        };
        if let Some(f) = fault_override {
            made.faults = FaultState::new(f.clone());
        }
        map.insert(ask.name.to_owned(), made);
    }
    map.get_mut(ask.name)
}

impl Target {
    fn new(
        limits: Limits,
        faults: Faults,
        latency: Latency,
        output_tokens: u32,
        now: Instant,
    ) -> Self {
        Target {
            quota: Quota::new(&limits, now),
            limits,
            faults: FaultState::new(faults),
            latency,
            output_tokens,
            counters: Counters::default(),
        }
    }
}
