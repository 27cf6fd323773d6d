//! Durable jobs in the gateway: the store the config names, opened at
//! startup and closed on shutdown, the retention cleaner, and the queue
//! gauges read at scrape time.

mod admitted;
#[cfg(test)]
mod redis_tests;
mod traced;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{
    JobState, JobStore, Kinds, PostgresStore, Retention, SqliteStore, StoreConfig, WorkerPool,
    worker::ShutdownReport,
};
use tokio::task::JoinHandle;

use sluice_jobs_http::callback::CallbackConfig;

use crate::config::{Config, JobsConfig, StoreLocation};
use crate::error::{Cause, StartError, chain};

pub use sluice_jobs::AnyStore;

/// How often each gateway looks for due schedules. A tick fires within
/// this of its time (plus the claim's poll), once across replicas.
pub const SCHEDULE_POLL: Duration = Duration::from_millis(200);
/// The most schedules one look fires; more wait for the next look.
const FIRE_BATCH: u32 = 100;

/// The longest a scrape waits for the store's counts; past it the gauges
/// keep their last values.
const COUNTS_TIMEOUT: Duration = Duration::from_secs(2);

/// The open job store and the tasks that keep it.
#[derive(Debug)]
pub struct Jobs {
    store: AnyStore,
    /// The embedder's own kinds, beside the standard ones.
    kinds: Kinds,
    /// Where callbacks may go and their secret, while `[jobs.callbacks]`
    /// allows any.
    callbacks: Option<CallbackConfig>,
    cleaner: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Fires the schedules' due ticks.
    firer: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// The workers, when this gateway runs them.
    pool: Arc<std::sync::Mutex<Option<WorkerPool>>>,
}

impl Jobs {
    /// Opens the store `config.jobs` names (creating the data directory
    /// for SQLite) and starts the retention cleaner on the current runtime;
    /// the API accepts the standard kinds and `kinds`.
    ///
    /// # Errors
    /// [`StartError::Jobs`] naming the file or URL (password hidden);
    /// [`StartError::StandardKind`] for a kind of `kinds` named as a standard
    /// one.
    pub async fn open(config: &Config, kinds: Kinds) -> Result<Jobs, StartError> {
        if let Some(name) = kinds.names().find(|n| {
            sluice_jobs_http::KINDS.contains(n) || *n == sluice_jobs_http::callback::CALLBACK_KIND
        }) {
            return Err(StartError::StandardKind {
                name: name.to_owned(),
                standard: sluice_jobs_http::KINDS.join(", "),
            });
        }
        let j = &config.jobs;
        let callbacks = callbacks(config)?;
        let location = j.location(&config.data_dir);
        let fail = |source: Cause| StartError::Jobs {
            store: location.display(),
            source,
        };
        let store_config =
            StoreConfig::default().idempotency_ttl(Duration::from_secs(j.idempotency_ttl_seconds));
        location.create_dir().map_err(|e| fail(e.into()))?;
        let store = match &location {
            StoreLocation::Sqlite(path) => AnyStore::from(
                SqliteStore::open(path, store_config)
                    .await
                    .map_err(|e| fail(e.into()))?,
            ),
            StoreLocation::Postgres(url) => AnyStore::from(
                PostgresStore::connect(url, store_config)
                    .await
                    .map_err(|e| fail(e.into()))?,
            ),
        };
        let cleaner = tokio::spawn(clean(store.clone(), j.clone()));
        let pool = Arc::new(std::sync::Mutex::new(None));
        let firer = tokio::spawn(fire(store.clone(), Arc::clone(&pool)));
        Ok(Jobs {
            store,
            kinds,
            callbacks,
            cleaner: std::sync::Mutex::new(Some(cleaner)),
            firer: std::sync::Mutex::new(Some(firer)),
            pool,
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
        credentials: &crate::credentials::UpstreamCredentials,
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
            self.callbacks.clone(),
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

    /// Where callbacks may go, or `None` while `[jobs.callbacks]` allows
    /// none.
    pub fn callbacks(&self) -> Option<&CallbackConfig> {
        self.callbacks.as_ref()
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
        for slot in [&self.cleaner, &self.firer] {
            if let Some(task) = slot.lock().ok().and_then(|mut c| c.take()) {
                task.abort();
            }
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
        // The cleaner and the firer must not outlive their gateway (tests
        // start many).
        for slot in [&mut self.cleaner, &mut self.firer] {
            if let Some(task) = slot.get_mut().ok().and_then(Option::take) {
                task.abort();
            }
        }
    }
}

/// Fires the schedules' due ticks every [`SCHEDULE_POLL`], and wakes this
/// gateway's workers of the queues it enqueued to. Every replica runs it:
/// the store fires each tick once (see `sluice_jobs::schedule`).
async fn fire(store: AnyStore, pool: Arc<std::sync::Mutex<Option<WorkerPool>>>) {
    let mut tick = tokio::time::interval(SCHEDULE_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.fire_schedules(FIRE_BATCH).await {
            Ok(jobs) if jobs.is_empty() => {}
            Ok(jobs) => {
                for job in &jobs {
                    tracing::debug!(job = %job.id, schedule = job.schedule.as_deref().unwrap_or(""), tenant = %job.tenant, "schedule fired");
                    crate::metrics::job_enqueued(&job.queue, &job.kind);
                }
                if let Ok(slot) = pool.lock()
                    && let Some(pool) = slot.as_ref()
                {
                    for job in &jobs {
                        pool.notify(&job.queue);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %chain(&e), "firing schedules"),
        }
    }
}

/// Deletes finished jobs past their retention, every cleanup interval.
async fn clean(store: AnyStore, config: JobsConfig) {
    let retention = Retention {
        completed: Duration::from_secs(config.completed_retention_seconds),
        dead: Duration::from_secs(config.dead_retention_seconds),
        cancelled: Duration::from_secs(config.cancelled_retention_seconds),
        events: Duration::from_secs(config.events_retention_seconds),
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

/// `[jobs.callbacks]` with its secret, or `None` while it allows no URL.
///
/// # Errors
/// [`StartError::MissingToken`] when the secret's variable is not set.
fn callbacks(config: &Config) -> Result<Option<CallbackConfig>, StartError> {
    let c = &config.jobs.callbacks;
    if c.allow.is_empty() {
        return Ok(None);
    }
    let var = c.secret_env.clone().unwrap_or_default();
    let secret = config
        .secrets
        .get(&var)
        .ok_or_else(|| StartError::MissingToken {
            key: "jobs.callbacks.secret_env",
            var: var.clone(),
        })?;
    CallbackConfig::new(
        &c.allow,
        secret.as_bytes().to_vec(),
        Duration::from_millis(c.timeout_ms),
    )
    .map(Some)
    .map_err(|why| StartError::Workers {
        what: "jobs.callbacks.allow".into(),
        source: why.into(),
    })
}
