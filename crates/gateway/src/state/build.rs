//! [`Builder`]: the gateway's state built once, in start-up order —
//! config → limiter → queues → writers → stores → job workers → audit →
//! dashboard sampler — each substate whole when it is built, so nothing
//! is filled in later. The listener comes last, in `server.rs`, and with
//! it the warnings ([`Builder::finish`]).

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::Kinds;
use sluice_redis::RedisLimiter;
use tokio::sync::Mutex;

use super::{Admission, AppState, Grace, Inner, Limits, Observers, Spend, Stores, Upstreams};
use crate::config::Config;
use crate::dashboard::Board;
use crate::error::StartError;
use crate::keys::tokens::Keys;
use crate::metrics::{Metrics, Refresh};
use crate::trace::TraceWriter;

/// Every substate but the warnings, which wait for the listener.
#[derive(Debug)]
pub(crate) struct Builder {
    pub(super) config: Arc<Config>,
    pub(super) limits: Arc<Limits>,
    upstreams: Arc<Upstreams>,
    pub(super) admission: Arc<Admission>,
    spend: Arc<Spend>,
    pub(super) observers: Arc<Observers>,
    pub(super) stores: Arc<Stores>,
}

impl Builder {
    /// Opens everything `config` asks for, the job store with the
    /// embedder's `kinds`: connects to Redis when
    /// `[redis]` is set (Redis being down is not an error: it starts
    /// degraded), opens the stores, starts the writers and the job
    /// workers, and takes the dashboard's first snapshot.
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub(crate) async fn open(config: Config, kinds: Kinds) -> Result<Builder, StartError> {
        // Before any store opens: SQLite would create a deleted file and
        // take an emptied one for a new database.
        crate::stores::check_all(&config)?;
        let redis = match &config.redis {
            Some(r) => Some(crate::limits::rules::connect_redis(&config, r).await?),
            None => None,
        };
        let core = Core::build(config, redis)?;
        let config = &core.config;
        let jobs = match config.jobs.enabled {
            true => Some(crate::jobs::Jobs::open(config, kinds).await?),
            false => None,
        };
        // After the job store (whose database it may share), before the
        // workers (whose attempts it records).
        let ledger = match config.ledger.enabled {
            true => Some(crate::ledger::UsageLedger::open(config).await?),
            false => None,
        };
        // Before the workers, which ask it whether a job's tenant is
        // blocked before each attempt.
        let keystore = match config.keys.enabled {
            true => {
                let redis = core.limits.redis.clone();
                Some(crate::keys::KeyRegistry::open(config, redis).await?)
            }
            false => None,
        };
        if let Some(jobs) = &jobs
            && config.jobs.workers
        {
            // The request path's limits: with `[redis]`, job rates and the
            // API buckets jobs call through are every replica's.
            jobs.start_workers(
                config,
                &core.upstreams.credentials,
                core.limits.shared.clone(),
                core.upstreams.client.clone(),
                core.otel.as_ref(),
                ledger.as_ref(),
                keystore.as_ref().map(|k| k.store().clone()),
            )
            .await?;
        }
        let audit = match config.audit.enabled {
            true => {
                let audit = crate::audit::Audit::open(config).await?;
                core.limits.limiter.on_change(audit.reductions());
                if let Some(r) = &core.limits.redis {
                    r.on_change(audit.reductions());
                }
                Some(audit)
            }
            false => None,
        };
        // Every store opened: a later start knows their files existed.
        crate::stores::mark_all(config);
        let built = core.finish(keystore, jobs, audit, ledger);
        // Once every source it reads is open: the first snapshot is whole.
        super::sampler::start(&built).await;
        Ok(built)
    }

    /// What is built without a store: the limiter, queues, clients and
    /// writers (the limiter's maintenance task is spawned on the current
    /// runtime); no key store, job store, audit trail or ledger.
    ///
    /// # Errors
    /// [`StartError`] naming what is wrong.
    pub(crate) fn without_stores(config: Config) -> Result<Builder, StartError> {
        Ok(Core::build(config, None)?.finish(None, None, None, None))
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Whether a tenant is in the key store.
    pub(crate) fn has_stored_tenants(&self) -> bool {
        (self.stores.keystore.as_ref()).is_some_and(crate::keys::KeyRegistry::has_tenants)
    }

    /// The state, with what is unsafe about this configuration.
    pub(crate) fn finish(self, warnings: Vec<String>) -> AppState {
        AppState {
            inner: Arc::new(Inner {
                config: self.config,
                limits: self.limits,
                upstreams: self.upstreams,
                admission: self.admission,
                spend: self.spend,
                observers: self.observers,
                stores: self.stores,
                grace: Grace::default(),
                warnings,
            }),
        }
    }
}

/// What is built before the stores open.
struct Core {
    config: Arc<Config>,
    limits: Arc<Limits>,
    upstreams: Arc<Upstreams>,
    admission: Arc<Admission>,
    spend: Arc<Spend>,
    keys: Keys,
    otel: Option<sluice_otel::Exporter>,
    otel_task: Option<sluice_otel::ExporterTask>,
    metrics: Metrics,
    traces: Option<(TraceWriter, crate::trace::TraceWriterTask)>,
    board: Arc<Board>,
    gauges: Refresh,
}

impl Core {
    fn build(config: Config, redis: Option<RedisLimiter>) -> Result<Core, StartError> {
        let limits = Limits::build(&config, redis)?;
        let keys = Keys::from_config(&config)?;
        let upstreams = Upstreams::build(&config)?;
        let admission = Admission::build(&config);
        if let Some(r) = &limits.redis {
            // Replicas share a limit in proportion to the tenants each
            // has waiting for it (docs/gateway.md, "Fair across replicas"):
            // a model's lane is named as its requests resource is.
            let q = admission.queue.clone();
            r.weigh_by(move |resource| {
                q.lane_weight(resource.strip_prefix("tokens:").unwrap_or(resource))
            });
        }
        let (otel, otel_task) = match &config.otel {
            Some(o) => {
                let export = o.export_config().map_err(|e| StartError::Otel(e.into()))?;
                let (e, t) =
                    sluice_otel::Exporter::spawn(export).map_err(|e| StartError::Otel(e.into()))?;
                (Some(e), Some(t))
            }
            None => (None, None),
        };
        let metrics =
            Metrics::install(config.metrics.tenant_labels).map_err(StartError::Metrics)?;
        if let Some(r) = &limits.redis {
            crate::metrics::redis_degraded(r.is_degraded());
        }
        let traces = config.trace.enabled.then(|| {
            TraceWriter::spawn(
                config.trace_dir(),
                config.trace.buffer.max(1),
                config.trace.retention(),
            )
        });
        let spend = Spend::build(&config)?;
        let board = Arc::new(Board::new(&config.ui));
        let gauges = Refresh::new(Duration::from_millis(config.metrics.refresh_interval_ms));
        Ok(Core {
            config: Arc::new(config),
            limits,
            upstreams,
            admission,
            spend,
            keys,
            otel,
            otel_task,
            metrics,
            traces,
            board,
            gauges,
        })
    }

    fn finish(
        self,
        keystore: Option<crate::keys::KeyRegistry>,
        jobs: Option<crate::jobs::Jobs>,
        audit: Option<crate::audit::Audit>,
        ledger: Option<Arc<crate::ledger::UsageLedger>>,
    ) -> Builder {
        let (traces, trace_task) = self.traces.unzip();
        Builder {
            config: self.config,
            limits: self.limits,
            upstreams: self.upstreams,
            admission: self.admission,
            spend: self.spend,
            observers: Arc::new(Observers {
                metrics: self.metrics,
                gauges: self.gauges,
                traces,
                otel: self.otel,
                board: self.board,
                audit,
                ledger,
                trace_task: Mutex::new(trace_task),
                otel_task: Mutex::new(self.otel_task),
            }),
            stores: Arc::new(Stores {
                keys: self.keys,
                keystore,
                jobs,
            }),
        }
    }
}
