//! The dashboard's sampler, started by [`Builder::open`] once every
//! source it reads is open: a snapshot a second of the substates it reads
//! (held weakly, so it stops with the gateway).

use std::sync::{Arc, Weak};

use super::{Admission, Builder, Limits, Observers, Stores};
use crate::config::Config;
use crate::dashboard::view::Snapshot;
use crate::dashboard::{INTERVAL, sample};

/// Takes a first snapshot, then one every [`INTERVAL`] until the
/// gateway is dropped (the task holds its sources only while it takes
/// a snapshot): a request never finds no snapshot, whichever serving
/// thread takes it and however busy the thread that samples is.
pub(super) async fn start(b: &Builder) {
    if !b.config.ui.enabled {
        return;
    }
    let mut sampler = sample::Sampler::default();
    let sources = Sources::of(b);
    if let Some(snapshot) = sources.sample(&mut sampler).await {
        b.observers.board.publish(snapshot);
    }
    tokio::spawn(async move {
        let start = tokio::time::Instant::now() + INTERVAL;
        let mut tick = tokio::time::interval_at(start, INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(snapshot) = sources.sample(&mut sampler).await else {
                break;
            };
            let Some(observers) = sources.observers.upgrade() else {
                break;
            };
            observers.board.publish(snapshot);
        }
    });
}

/// The substates the sampler reads, held weakly.
struct Sources {
    config: Arc<Config>,
    limits: Weak<Limits>,
    admission: Weak<Admission>,
    observers: Weak<Observers>,
    stores: Weak<Stores>,
}

impl Sources {
    fn of(b: &Builder) -> Sources {
        Sources {
            config: b.config.clone(),
            limits: Arc::downgrade(&b.limits),
            admission: Arc::downgrade(&b.admission),
            observers: Arc::downgrade(&b.observers),
            stores: Arc::downgrade(&b.stores),
        }
    }

    /// A snapshot now; `None` once the gateway is gone.
    async fn sample(&self, sampler: &mut sample::Sampler) -> Option<Snapshot> {
        let limits = self.limits.upgrade()?;
        let admission = self.admission.upgrade()?;
        let observers = self.observers.upgrade()?;
        let stores = self.stores.upgrade()?;
        let sources = sample::Sources {
            config: &self.config,
            limits: &limits.shared,
            queue: &admission.queue,
            ledger: observers.ledger.as_ref(),
            jobs: stores.jobs.as_ref(),
            audit: observers.audit.as_ref(),
            tools: (!self.config.mcp_servers.is_empty()).then_some(&observers.board.tools),
            pools: &limits.pools,
        };
        let totals = observers.board.pulse.read();
        Some(sampler.sample(&sources, totals).await)
    }
}
