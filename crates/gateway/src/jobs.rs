//! Durable jobs in the gateway: the store the config names, opened at
//! startup and closed on shutdown, the retention cleaner, and the queue
//! gauges read at scrape time.

mod admitted;
#[cfg(test)]
mod redis_tests;
mod traced;
mod workers;

use std::time::Duration;

use sluice_jobs::{
    JobState, JobStore, Kinds, PostgresStore, Retention, SqliteStore, StoreConfig, WorkerPool,
    worker::ShutdownReport,
};
use tokio::task::JoinHandle;

use crate::config::{Config, JobsConfig, StoreLocation};
use crate::error::chain;
use crate::state::StartError;

pub use sluice_jobs::AnyStore;

/// The longest a scrape waits for the store's counts; past it the gauges
/// keep their last values.
const COUNTS_TIMEOUT: Duration = Duration::from_secs(2);

/// The open job store and the tasks that keep it.
#[derive(Debug)]
pub struct Jobs {
    store: AnyStore,
    /// The embedder's own kinds, beside the standard ones.
    kinds: Kinds,
    cleaner: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// The workers, when this gateway runs them.
    pool: std::sync::Mutex<Option<WorkerPool>>,
}

impl Jobs {
    /// Opens the store `config.jobs` names (creating the data directory
    /// for SQLite) and starts the retention cleaner on the current runtime;
    /// the API accepts the standard kinds and `kinds`.
    ///
    /// # Errors
    /// [`StartError::Jobs`] naming the file or URL (password hidden);
    /// [`StartError::Workers`] for a kind of `kinds` named as a standard one.
    pub async fn open(config: &Config, kinds: Kinds) -> Result<Jobs, StartError> {
        if let Some(name) = kinds.names().find(|n| sluice_jobs_http::KINDS.contains(n)) {
            return Err(StartError::Workers(format!(
                "job kind {name:?} is a standard kind ({}): name yours otherwise",
                sluice_jobs_http::KINDS.join(", ")
            )));
        }
        let j = &config.jobs;
        let location = j.location(&config.data_dir);
        let fail = |detail: String| StartError::Jobs {
            store: location.display(),
            detail,
        };
        let store_config =
            StoreConfig::default().idempotency_ttl(Duration::from_secs(j.idempotency_ttl_seconds));
        location.create_dir().map_err(|e| fail(e.to_string()))?;
        let store = match &location {
            StoreLocation::Sqlite(path) => AnyStore::from(
                SqliteStore::open(path, store_config)
                    .await
                    .map_err(|e| fail(chain(&e)))?,
            ),
            StoreLocation::Postgres(url) => AnyStore::from(
                PostgresStore::connect(url, store_config)
                    .await
                    .map_err(|e| fail(chain(&e)))?,
            ),
        };
        let cleaner = tokio::spawn(clean(store.clone(), j.clone()));
        Ok(Jobs {
            store,
            kinds,
            cleaner: std::sync::Mutex::new(Some(cleaner)),
            pool: std::sync::Mutex::new(None),
        })
    }

    /// Starts workers for the configured queues on `limiter` (the
    /// gateway's: in-process, or shared through Redis with `[redis]`),
    /// calling upstreams with `client`, each attempt a span of `otel`'s
    /// when it exports.
    ///
    /// # Errors
    /// [`StartError::Workers`] naming what cannot be used.
    #[allow(clippy::too_many_arguments)] // the start-up order's parts, each used once
    pub(crate) async fn start_workers(
        &self,
        config: &Config,
        credentials: &crate::credentials::Upstreams,
        limiter: sluice_limit::SharedLimiter,
        client: reqwest::Client,
        otel: Option<&sluice_otel::Exporter>,
        ledger: Option<&std::sync::Arc<crate::ledger::UsageLedger>>,
        keys: Option<sluice_keys::KeyStore>,
    ) -> Result<(), StartError> {
        let pool = workers::start(
            config,
            credentials,
            self.store.clone(),
            &self.kinds,
            limiter,
            client,
            otel,
            ledger,
            keys,
        )?;
        tracing::info!(
            worker = pool.worker_id(),
            queues = config.jobs.queues.len(),
            "job workers started"
        );
        if let Ok(mut slot) = self.pool.lock() {
            *slot = Some(pool);
        }
        Ok(())
    }

    /// Wakes the workers of `queue` (if this gateway runs them), so that a
    /// job made due by the API starts now rather than at the next poll.
    pub(crate) fn notify(&self, queue: &str) {
        if let Ok(slot) = self.pool.lock()
            && let Some(pool) = slot.as_ref()
        {
            pool.notify(queue);
        }
    }

    /// What damage the workers found in the store, if any: they claim
    /// nothing more, and `/readyz` answers 503.
    pub fn damage(&self) -> Option<String> {
        let slot = self.pool.lock().ok()?;
        slot.as_ref()?.health().damage().map(str::to_owned)
    }

    /// The store.
    pub fn store(&self) -> &AnyStore {
        &self.store
    }

    /// The embedder's own kinds ([`Gateway::bind_with`](crate::Gateway::bind_with)).
    pub fn kinds(&self) -> &Kinds {
        &self.kinds
    }

    /// Stops the workers: they claim nothing more, and jobs still running
    /// after `grace` go back to the store with no attempt used. Returns the
    /// pool's report (none when this gateway runs no workers).
    pub async fn stop_workers(&self, grace: Duration) -> Option<ShutdownReport> {
        let pool = self.pool.lock().ok().and_then(|mut slot| slot.take())?;
        Some(pool.shutdown(grace).await)
    }

    /// Stops the cleaner and closes the store: last, once nothing (no
    /// request in flight, no worker) can use it any more.
    pub async fn close(&self) {
        if let Some(task) = self.cleaner.lock().ok().and_then(|mut c| c.take()) {
            task.abort();
        }
        self.store.close().await;
    }

    /// Sets `sluice_jobs{queue,state}` from the store's counts; the
    /// `configured` queues that hold no jobs (any more) read 0.
    pub(crate) async fn refresh_gauges<'a>(&self, configured: impl Iterator<Item = &'a String>) {
        match tokio::time::timeout(COUNTS_TIMEOUT, self.store.counts()).await {
            Ok(Ok(queues)) => {
                for q in &queues {
                    for state in JobState::ALL {
                        crate::metrics::jobs(&q.queue, state.as_str(), q.counts.get(state));
                    }
                }
                for name in configured.filter(|n| !queues.iter().any(|q| &q.queue == *n)) {
                    for state in JobState::ALL {
                        crate::metrics::jobs(name, state.as_str(), 0);
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %chain(&e), "job counts for metrics"),
            Err(_) => tracing::warn!("job counts for metrics: the store did not answer in time"),
        }
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        // The cleaner must not outlive its gateway (tests start many).
        if let Some(task) = self.cleaner.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

/// Deletes finished jobs past their retention, every cleanup interval.
async fn clean(store: AnyStore, config: JobsConfig) {
    let retention = Retention {
        completed: Duration::from_secs(config.completed_retention_seconds),
        dead: Duration::from_secs(config.dead_retention_seconds),
        cancelled: Duration::from_secs(config.cancelled_retention_seconds),
    };
    let mut tick = tokio::time::interval(Duration::from_secs(config.cleanup_interval_seconds));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.cleanup(&retention).await {
            Ok(c) => tracing::debug!(
                completed = c.completed,
                dead = c.dead,
                cancelled = c.cancelled,
                keys = c.expired_keys,
                "job retention"
            ),
            Err(e) => tracing::warn!(error = %chain(&e), "job retention"),
        }
    }
}
