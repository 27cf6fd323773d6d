//! Changing the sim while it runs: faults, limits, reset. Behind both
//! `POST /_sim/…` and [`crate::SimHandle`].

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{Ask, Kind, Shared, target};
use crate::Error;
use crate::config::{Faults, Limits};
use crate::faults::FaultState;
use crate::log::Line;
use crate::quota::Quota;
use crate::stats::Counters;

/// What a runtime change applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every model and API, also those first called later.
    All,
    /// One model, by the name clients send.
    Model(String),
    /// One SaaS API.
    Api(String),
}

impl Scope {
    /// The scope named by the optional `model` and `api` fields of an
    /// admin request: neither means all.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if both are given.
    pub fn from_fields(model: Option<String>, api: Option<String>) -> Result<Self, Error> {
        match (model, api) {
            (None, None) => Ok(Scope::All),
            (Some(m), None) => Ok(Scope::Model(m)),
            (None, Some(a)) => Ok(Scope::Api(a)),
            (Some(_), Some(_)) => Err(Error::invalid("model", "give `model` or `api`, not both")),
        }
    }
}

impl Shared {
    /// Replaces the faults of `scope` and restarts its "every Nth" counts.
    pub(crate) fn set_faults(&self, scope: &Scope, faults: Faults) -> Result<(), Error> {
        faults.check("faults")?;
        let mut guard = self.lock();
        let inner = &mut *guard;
        if *scope == Scope::All {
            for t in inner.models.values_mut().chain(inner.apis.values_mut()) {
                t.faults = FaultState::new(faults.clone());
            }
            inner.fault_override = Some(faults);
            return Ok(());
        }
        let t = self.scoped(inner, scope)?;
        t.faults = FaultState::new(faults);
        Ok(())
    }

    /// Replaces the limits of one model or API; its buckets start full.
    pub(crate) fn set_limits(&self, scope: &Scope, limits: Limits) -> Result<(), Error> {
        limits.check("limits")?;
        let mut inner = self.lock();
        let t = self.scoped(&mut inner, scope)?;
        t.quota = Quota::new(&limits, Instant::now());
        t.limits = limits;
        Ok(())
    }

    /// Zeroes every counter, empties the log (its `seq` keeps counting)
    /// and restarts the "every Nth" counts. Limits and faults stay.
    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        for t in inner.models.values_mut().chain(inner.apis.values_mut()) {
            t.counters = Counters {
                provider: t.counters.provider.take(),
                ..Counters::default()
            };
            t.faults.restart();
        }
        inner.log.clear();
    }

    /// The one target `scope` names, made if needed.
    fn scoped<'a>(
        &self,
        inner: &'a mut super::Inner,
        scope: &Scope,
    ) -> Result<&'a mut super::Target, Error> {
        let (kind, name, map) = match scope {
            Scope::All => return Err(Error::invalid("model", "name a `model` or an `api`")),
            Scope::Model(m) => (Kind::Model, m, &mut inner.models),
            Scope::Api(a) => (Kind::Api, a, &mut inner.apis),
        };
        let provider = self.config.provider_of(name, None, "openai");
        let ask = Ask {
            kind,
            name,
            provider: &provider,
            tokens_in: 0,
            max_tokens: None,
            out: super::Output::Text,
            line: Line::default(),
        };
        let unknown = || match kind {
            Kind::Model => Error::invalid("model", format!("too many models to add {name:?}")),
            Kind::Api => Error::invalid("api", format!("no API named {name:?}")),
        };
        let over = inner.fault_override.clone();
        target(map, &self.config, over.as_ref(), &ask, Instant::now()).ok_or_else(unknown)
    }
}
