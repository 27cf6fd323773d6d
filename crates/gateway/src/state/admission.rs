//! [`Admission`]: the admission queue, the bulkheads and the client ids
//! in flight (the dedup layer's).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sluice_admit::{AdmissionQueue, Bulkheads};

use crate::config::Config;
use crate::response::Shared;

/// The admission substate.
#[derive(Debug)]
pub(crate) struct Admission {
    /// The admission queue, tenants weighted as `[[tenants]]` says.
    pub(crate) queue: AdmissionQueue<Shared>,
    pub(crate) bulkheads: Bulkheads,
    /// Client request ids in flight, with their bodies' hashes (dedup).
    pub(crate) dedup: Ids,
}

impl Admission {
    /// The queue and bulkheads `config` sets.
    pub(crate) fn build(config: &Config) -> Arc<Admission> {
        let mut queue_config = config.queue.clone();
        for t in &config.tenants {
            if let Some(w) = NonZeroU32::new(t.weight) {
                queue_config.weights = queue_config.weights.with(t.name.clone(), w);
            }
        }
        Arc::new(Admission {
            queue: AdmissionQueue::new(queue_config),
            bulkheads: Bulkheads::new(config.bulkheads.clone()),
            dedup: Ids::default(),
        })
    }
}

/// The client ids in flight, per tenant, with their bodies' hashes (and
/// how many requests carry each): entries live only while a request with
/// the id is in flight, so the table is bounded by the admission queue.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    table: Mutex<HashMap<(String, String), (u64, usize)>>,
}

impl Ids {
    /// The table, (tenant, id) → (body hash, requests).
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), (u64, usize)>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
