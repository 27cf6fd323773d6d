//! The gateway's shared state, built from the config in startup order:
//! config → limiter → queues → writers (the listener comes last, in
//! `server.rs`).

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use sluice_admit::{AdmissionQueue, Bulkheads};
use sluice_limit::{Limiter, SharedLimiter, ToolClassifier};
use sluice_redis::RedisLimiter;

use crate::config::Config;
use crate::error::{ApiError, StartError};
use crate::limits::holds::Holds;
use crate::limits::rules::{adaptive, capacity_changed, connect_redis, rules};
use crate::metrics::Metrics;
use crate::response::Shared;
use crate::trace::{TraceWriter, TraceWriterTask};

/// Everything a request handler needs; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
/// What [`AppState`] holds; its parts are the gateway's own.
pub struct Inner {
    pub(crate) config: Config,
    pub(crate) limiter: Limiter,
    /// Where the request path's (and the job workers') limits live:
    /// `limiter` itself, or Redis when `[redis]` is configured.
    pub(crate) limits: SharedLimiter,
    /// The shared limiter with `[redis]`, for what only it has (its
    /// health, the capacity bus); `limits` is the same one.
    pub(crate) redis: Option<RedisLimiter>,
    /// Grants held for callers of the limiter API.
    pub(crate) holds: Holds,
    /// What tenants' reports to the limiter API did, for corroboration
    /// and their own pauses.
    pub(crate) reports: crate::limits::reports::Reports,
    /// Client request ids in flight, with their bodies' hashes (dedup).
    pub(crate) dedup_ids: crate::layers::dedup::Ids,
    pub(crate) queue: AdmissionQueue<Shared>,
    pub(crate) bulkheads: Bulkheads,
    pub(crate) client: reqwest::Client,
    /// Model and API calls' client (`client.rs`); `client` serves jobs.
    pub(crate) upstream: crate::client::UpstreamClient,
    /// Which upstreams go through a proxy, decided at start.
    pub(crate) routes: crate::client::Routes,
    pub(crate) tools: ToolClassifier,
    /// Tenant keys and the operator's tokens.
    pub(crate) keys: crate::auth::Keys,
    /// The credentials sent upstream, by API and provider, per tenant.
    pub(crate) credentials: crate::credentials::Upstreams,
    pub(crate) draining: AtomicBool,
    /// Set when the shutdown grace is about to end: requests still waiting
    /// for the limiter, a pool or a retry are answered 503 then, while
    /// their connections can still carry the answer.
    grace_over: tokio::sync::watch::Sender<bool>,
    pub(crate) metrics: Metrics,
    /// The gauges `/metrics` reads from the job store and the limiter,
    /// refreshed at most once per `metrics.refresh_interval_ms`.
    pub(crate) gauges: crate::metrics::Refresh,
    /// What models cost: the shipped prices with `[prices]` over them
    /// (the ledger's costs, budgets' reservations).
    pub(crate) prices: sluice_usage::PriceTable,
    /// The response cache, in memory or in Redis (`[cache]`).
    pub(crate) cache: crate::cache::SharedCache,
    /// What the cache did for each tenant.
    pub(crate) cache_tenants: Arc<crate::cache::TenantCounters>,
    /// Identical cache misses in flight together.
    pub(crate) cache_flights: Arc<crate::cache::Flights>,
    /// `None` when traces are off.
    pub(crate) traces: Option<TraceWriter>,
    /// The OpenTelemetry exporter; `None` without `[otel]`.
    pub(crate) otel: Option<sluice_otel::Exporter>,
    /// Where budgets' spend is counted: here, or in Redis with `[redis]`.
    pub(crate) budgets: Arc<dyn sluice_usage::budget::BudgetStore>,
    /// Reads budgets' past spend from the ledger when they are counted
    /// here (`None` with `[redis]`, which keeps it).
    pub(crate) budget_seed: Option<crate::budgets::Seeder>,
    /// Callers' budgets as the count's rules, kept between requests.
    pub(crate) budget_rules: crate::budgets::CallerRules,
    /// What is unsafe about this configuration; set by `Gateway::bind`.
    pub(crate) warnings: std::sync::OnceLock<Vec<String>>,
    /// The job store; set by `Gateway::bind` when `[jobs] enabled`.
    pub(crate) jobs: std::sync::OnceLock<crate::jobs::Jobs>,
    /// Tenants and keys managed at run time; set by `Gateway::bind` when
    /// `[keys] enabled`.
    pub(crate) keystore: std::sync::OnceLock<crate::keys::KeyRegistry>,
    /// The usage ledger; set by `Gateway::bind` when `[ledger] enabled`.
    pub(crate) ledger: std::sync::OnceLock<Arc<crate::ledger::UsageLedger>>,
    /// The audit trail; set by `Gateway::bind` when `[audit] enabled`.
    pub(crate) audit: std::sync::OnceLock<crate::audit::Audit>,
    trace_task: tokio::sync::Mutex<Option<TraceWriterTask>>,
    otel_task: tokio::sync::Mutex<Option<sluice_otel::ExporterTask>>,
    /// The live dashboard's totals, history and stream.
    pub(crate) board: crate::dashboard::Board,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl AppState {
    /// Whether no caller needs a key: no `[[tenants]]` and no tenant in
    /// the key store.
    pub(crate) fn is_open(&self) -> bool {
        self.keys.is_open() && !self.keystore.get().is_some_and(|k| k.has_tenants())
    }

    /// Builds the state; the limiter's maintenance task is spawned on the
    /// current runtime.
    ///
    /// # Errors
    /// [`StartError`] naming what is wrong.
    pub fn new(config: Config) -> Result<AppState, StartError> {
        AppState::build(config, None)
    }

    /// Builds the state, connecting to Redis first when `[redis]` is set
    /// (Redis being down is not an error: it starts degraded).
    ///
    /// # Errors
    /// [`StartError`] naming what is wrong.
    pub async fn start(config: Config) -> Result<AppState, StartError> {
        let redis = match &config.redis {
            Some(r) => Some(connect_redis(&config, r).await?),
            None => None,
        };
        AppState::build(config, redis)
    }

    fn build(config: Config, redis: Option<RedisLimiter>) -> Result<AppState, StartError> {
        let limiter = Limiter::builder()
            .rules(rules(&config))
            .adaptive(adaptive(&config))
            .build()?;
        let limits: SharedLimiter = match &redis {
            Some(r) => Arc::new(r.clone()),
            None => limiter.clone().into(),
        };
        limiter.spawn_maintenance(Duration::from_secs(1));
        limiter.on_change(capacity_changed);

        let keys = crate::auth::Keys::from_config(&config)?;
        let credentials = crate::credentials::Upstreams::from_config(&config)?;
        let mut queue_config = config.queue.clone();
        for t in &config.tenants {
            if let Some(w) = NonZeroU32::new(t.weight) {
                queue_config.weights = queue_config.weights.with(t.name.clone(), w);
            }
        }
        let queue = AdmissionQueue::new(queue_config);
        let bulkheads = Bulkheads::new(config.bulkheads.clone());
        let mut tools = ToolClassifier::new();
        for api in &config.apis {
            for prefix in &api.tool_prefixes {
                tools = tools.with(prefix.clone(), api.name.clone());
            }
        }
        // TLS to real providers; installing twice (tests) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            // Credentials (`authorization`, Anthropic's `x-api-key`) must
            // never follow a redirect to another host: redirects reach the
            // caller as they are.
            .redirect(reqwest::redirect::Policy::none())
            // HTTP/2 is built in for the OTLP exporter's gRPC; upstream
            // calls stay on HTTP/1.1, as before it.
            .http1_only()
            .build()
            .map_err(|e| StartError::Client(e.into()))?;
        let upstream =
            crate::client::UpstreamClient::new(client.clone(), config.http.serving_threads())
                .map_err(|e| StartError::Client(e.into()))?;
        let routes = crate::client::Routes::new(&config, &upstream);
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
        if let Some(r) = &redis {
            crate::metrics::redis_degraded(r.is_degraded());
        }
        let (traces, trace_task) = if config.trace.enabled {
            let (w, t) = TraceWriter::spawn(
                config.trace_dir(),
                config.trace.buffer.max(1),
                config.trace.retention(),
            );
            (Some(w), Some(t))
        } else {
            (None, None)
        };
        let holds = Holds::new(
            config.limits_api.max_held_per_tenant,
            config.limits_api.max_settle_multiple,
        );
        let cache = crate::cache::build(&config).map_err(|e| StartError::Cache(e.into()))?;
        let prices = crate::config::price_table(&config.prices)?;
        let board = crate::dashboard::Board::new(&config.ui);
        let (budgets, budget_seed) =
            crate::budgets::store(&config).map_err(|e| StartError::Budgets(e.into()))?;
        let gauges =
            crate::metrics::Refresh::new(Duration::from_millis(config.metrics.refresh_interval_ms));
        let state = AppState {
            inner: Arc::new(Inner {
                config,
                limiter,
                limits,
                redis,
                holds,
                reports: Default::default(),
                dedup_ids: Default::default(),
                queue,
                bulkheads,
                client,
                upstream,
                routes,
                tools,
                keys,
                credentials,
                draining: AtomicBool::new(false),
                grace_over: tokio::sync::watch::Sender::new(false),
                gauges,
                metrics,
                prices,
                cache,
                cache_tenants: Arc::default(),
                cache_flights: Arc::default(),
                traces,
                otel,
                budgets,
                budget_seed,
                budget_rules: crate::budgets::CallerRules::default(),
                warnings: std::sync::OnceLock::new(),
                jobs: std::sync::OnceLock::new(),
                keystore: std::sync::OnceLock::new(),
                ledger: std::sync::OnceLock::new(),
                audit: std::sync::OnceLock::new(),
                trace_task: tokio::sync::Mutex::new(trace_task),
                otel_task: tokio::sync::Mutex::new(otel_task),
                board,
            }),
        };
        // Grants held for the limiter API are released once their TTL
        // passes, whether or not anyone asks for another; the task ends
        // with the state.
        let weak = Arc::downgrade(&state.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(inner) => inner.holds.expire(),
                    None => break,
                }
            }
        });
        Ok(state)
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Starts draining: readiness fails, new requests get 503.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Ends the shutdown grace for requests that are still waiting: the
    /// admission queue sends its entries away and every wait in
    /// [`AppState::grace_over`] ends, each with a 503.
    pub fn end_grace(&self) {
        self.queue.close();
        self.grace_over.send_replace(true);
    }

    /// Resolves once [`AppState::end_grace`] was called (never before).
    pub(crate) async fn grace_over(&self) {
        let mut rx = self.grace_over.subscribe();
        // The sender lives as long as the state: an error cannot happen
        // while anyone waits here.
        if rx.wait_for(|over| *over).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// [`AppState::grace_over`] as a future of its own, for what outlives
    /// the request's handler (a stream's body).
    pub(crate) fn grace_over_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.grace_over.subscribe();
        async move {
            if rx.wait_for(|over| *over).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// `fut`'s output, or `None` when the shutdown grace has ended or ends
    /// before it is ready (as `select!`, biased to the grace, would
    /// answer). A future ready at its first poll (a grant, a free slot:
    /// most requests) is taken without watching the grace, which costs a
    /// subscription, a registered waiter and its removal.
    pub(crate) async fn unless_grace_over<F: Future>(&self, fut: F) -> Option<F::Output> {
        if *self.grace_over.borrow() {
            return None;
        }
        let mut fut = std::pin::pin!(fut);
        if let Poll::Ready(out) = crate::ready::first_poll(fut.as_mut()).await {
            return Some(out);
        }
        tokio::select! {
            biased;
            () = self.grace_over() => None,
            out = fut => Some(out),
        }
    }

    /// The answer to a request still waiting when the grace ends.
    pub(crate) fn grace_ended() -> ApiError {
        ApiError::Unavailable {
            message: "the gateway is shutting down: the request was still waiting when its grace ended; send it again".into(),
            retry_after: Some(Duration::from_secs(1)),
        }
    }

    /// What models cost: the shipped prices with `[prices]` over them.
    pub fn prices(&self) -> &sluice_usage::PriceTable {
        &self.prices
    }

    /// Writes out every queued trace, span, audit entry and ledger record
    /// and stops the writers.
    pub async fn shutdown_writers(&self) {
        if let Some(task) = self.trace_task.lock().await.take() {
            task.shutdown().await;
        }
        if let Some(task) = self.otel_task.lock().await.take() {
            task.shutdown().await;
        }
        if let Some(audit) = self.audit.get() {
            audit.close().await;
        }
        if let Some(ledger) = self.ledger.get() {
            ledger.shutdown().await;
        }
    }

    /// Refuses new work while draining.
    pub(crate) fn check_open(&self) -> Result<(), ApiError> {
        if self.is_draining() {
            return Err(ApiError::Unavailable {
                message: "the gateway is shutting down".into(),
                retry_after: Some(Duration::from_secs(1)),
            });
        }
        Ok(())
    }
}
