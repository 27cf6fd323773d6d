//! The gateway's shared state: typed substates, each built whole and in
//! start-up order by [`Builder`] (config → limiter → queues → writers →
//! stores; the listener comes last, in `server.rs`).
//!
//! A handler or layer takes the whole [`AppState`] or, through axum's
//! [`FromRef`], the substate it needs; a room below the layers (audit,
//! dashboard, jobs, ledger, keys, credentials, OTel) never takes the
//! whole state, only the substates or parts it reads.

mod admission;
mod build;
mod grace;
mod limits;
mod observers;
mod sampler;
mod spend;
mod stores;
mod upstreams;

use std::sync::Arc;

use axum::extract::FromRef;

use crate::config::Config;
use crate::error::StartError;

pub(crate) use admission::Admission;
pub(crate) use build::Builder;
pub(crate) use grace::Grace;
pub(crate) use limits::Limits;
pub(crate) use observers::Observers;
pub(crate) use spend::Spend;
pub(crate) use stores::Stores;
pub(crate) use upstreams::Upstreams;

/// Everything a request handler needs; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

/// What [`AppState`] holds: the configuration and the substates.
#[derive(Debug)]
pub struct Inner {
    pub(crate) config: Arc<Config>,
    /// The limiter (local or shared), holds and reports.
    pub(crate) limits: Arc<Limits>,
    /// Clients, proxy routes and credentials.
    pub(crate) upstreams: Arc<Upstreams>,
    /// The admission queue, bulkheads and dedup.
    pub(crate) admission: Arc<Admission>,
    /// Prices, budgets and the response cache.
    pub(crate) spend: Arc<Spend>,
    /// Metrics, traces, OTel, the dashboard, the audit trail, the ledger.
    pub(crate) observers: Arc<Observers>,
    /// The configured keys, the key store and the job store.
    pub(crate) stores: Arc<Stores>,
    /// Draining, and the end of the shutdown grace.
    pub(crate) grace: Grace,
    /// What is unsafe about this configuration (found at start).
    pub(crate) warnings: Vec<String>,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

/// Each substate, taken from the whole state by the extractors and
/// services that need only it.
macro_rules! from_ref {
    ($($field:ident: $ty:ty),* $(,)?) => {$(
        impl FromRef<AppState> for Arc<$ty> {
            fn from_ref(state: &AppState) -> Arc<$ty> {
                state.inner.$field.clone()
            }
        }
    )*};
}

from_ref!(
    config: Config,
    limits: Limits,
    upstreams: Upstreams,
    admission: Admission,
    spend: Spend,
    observers: Observers,
    stores: Stores,
);

impl AppState {
    /// Builds the state without its stores (no key store, job store,
    /// audit trail or ledger: `Gateway::bind` opens those); the limiter's
    /// maintenance task is spawned on the current runtime.
    ///
    /// # Errors
    /// [`StartError`] naming what is wrong.
    pub fn new(config: Config) -> Result<AppState, StartError> {
        Ok(Builder::without_stores(config)?.finish(Vec::new()))
    }

    /// Whether no caller needs a key: no `[[tenants]]` and no tenant in
    /// the key store.
    pub(crate) fn is_open(&self) -> bool {
        self.stores.is_open()
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.grace.is_draining()
    }

    /// Starts draining: readiness fails, new requests get 503.
    pub fn drain(&self) {
        self.grace.drain();
    }

    /// Ends the shutdown grace for requests that are still waiting: the
    /// admission queue sends its entries away and every wait in
    /// [`Grace::over`] ends, each with a 503.
    pub fn end_grace(&self) {
        self.admission.queue.close();
        self.grace.end();
    }

    /// What models cost: the shipped prices with `[prices]` over them.
    pub fn prices(&self) -> &sluice_usage::PriceTable {
        &self.spend.prices
    }

    /// Writes out every queued trace, span, audit entry and ledger record
    /// and stops the writers.
    pub async fn shutdown_writers(&self) {
        self.observers.shutdown().await;
    }
}
