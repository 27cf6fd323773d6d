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
use sluice_limit::{
    AdaptiveConfig, Algorithm, Limit, Limiter, Policy, Rules, SharedLimiter, ToolClassifier,
};
use sluice_redis::{Failure, Mode, RedisConfig, RedisLimiter};

use crate::config::{AdaptivePolicy, Config, ModelLimits, RedisSettings};
use crate::error::ApiError;
use crate::limits::holds::Holds;
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
    pub(crate) cache_flights: Arc<crate::layers::cache::Flights>,
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

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A limit in the config is unusable.
    #[error("invalid limits: {0}")]
    Limits(#[from] sluice_limit::Error),
    /// A tenant's key variable is not set.
    #[error("tenant {tenant:?}: environment variable {var} is not set")]
    MissingKey {
        /// The tenant.
        tenant: String,
        /// The variable.
        var: String,
    },
    /// A tenant's own upstream credential has no value.
    #[error("tenant {tenant:?}: {key}: environment variable {var} is not set")]
    MissingCredential {
        /// The tenant.
        tenant: String,
        /// The credential, e.g. `apis.slack.auth_env`.
        key: String,
        /// The variable.
        var: String,
    },
    /// A token's variable is not set.
    #[error("{key}: environment variable {var} is not set")]
    MissingToken {
        /// The key that names it, e.g. `ui.token_env`.
        key: &'static str,
        /// The variable.
        var: String,
    },
    /// One secret would name two roles (a tenant key that is also the
    /// admin token).
    #[error("{0}: every key must name one role")]
    SharedKey(String),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(String),
    /// The OpenTelemetry exporter could not be started.
    #[error("otel: {0}")]
    Otel(String),
    /// A serving thread or its runtime could not be started.
    #[error("cannot start a serving thread: {0}")]
    Threads(#[source] std::io::Error),
    /// The listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Metrics could not be installed.
    #[error("metrics: {0}")]
    Metrics(String),
    /// The `[redis]` settings are unusable.
    #[error("redis: {0}")]
    Redis(#[from] sluice_redis::Error),
    /// The job store could not be opened.
    #[error("cannot open the job store {store}: {detail}")]
    Jobs {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        detail: String,
    },
    /// The key store could not be opened.
    #[error("cannot open the key store {store}: {detail}")]
    Keys {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        detail: String,
    },
    /// The audit trail's store could not be opened.
    #[error("cannot open the audit store {store}: {detail}")]
    Audit {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        detail: String,
    },
    /// A store's file is missing although it existed, empty, unreadable
    /// or not a database ([`crate::stores`]).
    #[error("refusing to start: {0}")]
    Store(#[from] crate::stores::Refused),
    /// The job workers could not start.
    #[error("cannot start the job workers: {0}")]
    Workers(String),
    /// The response cache could not be built.
    #[error("response cache: {0}")]
    Cache(String),
    /// The usage ledger's store could not be opened.
    #[error("cannot open the usage ledger {store}: {detail}")]
    Ledger {
        /// The SQLite file or PostgreSQL URL (password hidden).
        store: String,
        /// Why.
        detail: String,
    },
    /// A price in `[prices]` does not read.
    #[error("{0}")]
    Prices(#[from] sluice_usage::PriceError),
    /// The budgets' count could not be set up.
    #[error("budgets: {0}")]
    Budgets(String),
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
        if let Some(r) = &redis {
            // Replicas share a limit in proportion to the tenants each
            // has waiting for it (docs/gateway.md, "Fair across replicas"):
            // a model's lane is named as its requests resource is.
            let q = queue.clone();
            r.weigh_by(move |resource| {
                q.lane_weight(resource.strip_prefix("tokens:").unwrap_or(resource))
            });
        }
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
            .map_err(|e| StartError::Client(e.to_string()))?;
        let upstream =
            crate::client::UpstreamClient::new(client.clone(), config.http.serving_threads())
                .map_err(StartError::Client)?;
        let routes = crate::client::Routes::new(&config, &upstream);
        let (otel, otel_task) = match &config.otel {
            Some(o) => {
                let export = o.export_config().map_err(StartError::Otel)?;
                let (e, t) = sluice_otel::Exporter::spawn(export)
                    .map_err(|e| StartError::Otel(e.to_string()))?;
                (Some(e), Some(t))
            }
            None => (None, None),
        };
        let metrics = Metrics::install(config.metrics.tenant_labels)
            .map_err(|e| StartError::Metrics(e.to_string()))?;
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
        let cache = crate::cache::build(&config).map_err(StartError::Cache)?;
        let prices = crate::config::price_table(&config.pricing, &config.prices)?;
        let board = crate::dashboard::Board::new(&config.ui);
        let (budgets, budget_seed) = crate::budgets::store(&config).map_err(StartError::Budgets)?;
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

    /// The model limits that apply to `model` (longest prefix).
    pub(crate) fn model_limits(&self, model: &str) -> Option<&ModelLimits> {
        self.config
            .models
            .iter()
            .filter(|m| model.starts_with(m.prefix.as_str()))
            .max_by_key(|m| m.prefix.len())
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

/// Counts and logs a capacity change, in-process or shared.
fn capacity_changed(c: &sluice_limit::CapacityChange) {
    crate::metrics::capacity_change(&c.resource, c.reason.as_str(), c.capacity as f64);
    tracing::info!(
        resource = %c.resource,
        from = c.previous,
        to = c.capacity,
        per_second = c.capacity as f64 / c.window.as_secs_f64().max(1e-9),
        reason = c.reason.as_str(),
        "capacity changed"
    );
}

fn adaptive(config: &Config) -> AdaptiveConfig {
    let a = &config.adaptive;
    AdaptiveConfig {
        reduce_factor: a.reduce_factor,
        recovery_factor: a.recovery_factor,
        recovery_interval: Duration::from_secs(a.recovery_interval_seconds),
        max_pause: Duration::from_secs(a.max_pause_seconds),
        policy: match a.policy {
            AdaptivePolicy::Evidence => Policy::Evidence,
            AdaptivePolicy::Seed => Policy::Seed,
        },
        jitter_margin: Duration::from_millis(a.jitter_margin_ms),
        max_jitter_margin: Duration::from_millis(a.max_jitter_margin_ms),
        strikes: a.strikes,
        ..AdaptiveConfig::default()
    }
}

/// The shared limiter for `[redis]`, with its metrics and logs wired.
async fn connect_redis(config: &Config, r: &RedisSettings) -> Result<RedisLimiter, StartError> {
    let mut cfg = RedisConfig::new(r.url.clone());
    cfg.prefix = r.prefix.clone();
    cfg.mode = if r.mode == "leased" {
        Mode::Leased
    } else {
        Mode::Exact
    };
    cfg.failure = if r.failure == "fail_closed" {
        Failure::FailClosed
    } else {
        Failure::FailOpen
    };
    cfg.timeout = Duration::from_millis(r.timeout_ms.max(1));
    cfg.lease_ttl = Duration::from_millis(r.lease_ttl_ms);
    cfg.block_ttl = Duration::from_millis(r.block_ttl_ms.max(1));
    if let Some(id) = &r.replica_id {
        cfg.replica_id = id.clone();
    }
    let limiter = RedisLimiter::connect(cfg, rules(config), adaptive(config)).await?;
    let failure = r.failure.clone();
    limiter.on_degraded(move |on| {
        crate::metrics::redis_degraded(on);
        if on {
            tracing::warn!(failure = %failure, "redis unreachable: limits are degraded");
        } else {
            tracing::info!("redis is back: limits are shared again");
        }
    });
    limiter.on_change(capacity_changed);
    if limiter.is_degraded() {
        tracing::warn!(
            url = %crate::config::redact_url(&r.url),
            "redis unreachable at start: limits are degraded"
        );
    }
    Ok(limiter)
}

/// Resource names: a model's requests are limited on its own name, its
/// tokens on `tokens:{model}`, its concurrency on `inflight:{model}`; an
/// API on `api:{name}` and `inflight:api:{name}`; a tenant's session on
/// `session:{tenant}:{thread}` (see [`session_resource`]).
pub(crate) fn tokens_resource(model: &str) -> String {
    format!("tokens:{model}")
}

/// The limiter resource of `tenant`'s session `thread`: sessions are the
/// tenant's own, so two tenants naming the same thread never share (or
/// drain) one. The tenant's name has `%` and `:` escaped, so the first `:`
/// after the prefix ends it.
pub(crate) fn session_resource(tenant: &str, thread: &str) -> String {
    format!(
        "{}{}{thread}",
        sluice_limit::SESSION_PREFIX,
        session_scope(tenant)
    )
}

/// `session:` then `tenant`, escaped, then `:`: what every name of
/// `tenant`'s sessions starts with.
fn session_scope(tenant: &str) -> String {
    let escaped = tenant.replace('%', "%25").replace(':', "%3A");
    format!("{escaped}:")
}

/// The session a tenant sees under the name `resource` names in its own
/// scope: `session:{thread}` → `session:{tenant}:{thread}`; other names
/// as they are.
pub(crate) fn scoped(tenant: &str, resource: &str) -> String {
    match resource.strip_prefix(sluice_limit::SESSION_PREFIX) {
        Some(thread) => session_resource(tenant, thread),
        None => resource.to_owned(),
    }
}

/// The name `tenant` knows `resource` by, or `None` for another tenant's
/// session (which it must not see).
pub(crate) fn unscoped(tenant: &str, resource: &str) -> Option<String> {
    // Per-key and per-tenant limits are the operator's: no tenant sees
    // another's (nor learns its key ids).
    if resource.starts_with(crate::keys::CALLER_PREFIX) {
        return None;
    }
    match resource.strip_prefix(sluice_limit::SESSION_PREFIX) {
        Some(rest) => rest
            .strip_prefix(&session_scope(tenant))
            .map(|thread| format!("{}{thread}", sluice_limit::SESSION_PREFIX)),
        None => Some(resource.to_owned()),
    }
}

/// See [`tokens_resource`].
pub(crate) fn inflight_resource(name: &str) -> String {
    format!("inflight:{name}")
}

/// `r` requests per second as capacity per window: whole numbers per
/// second, fractions as the smallest power-of-ten window that makes them
/// whole (2.5/s → 25 per 10 s).
pub(crate) fn rate_limit(r: f64, burst: u64) -> Limit {
    let mut window = 1u64;
    while (r * window as f64).fract().abs() > 1e-9 && window < 1_000 {
        window *= 10;
    }
    let capacity = ((r * window as f64).round() as u64).max(1);
    Limit::new(capacity, Duration::from_secs(window)).burst(burst.max(1))
}

/// The limiter's rules from the config.
pub(crate) fn rules(config: &Config) -> Rules {
    let mut rules = Rules::new();
    for m in &config.models {
        let rate = rate_limit(m.requests_per_second, m.burst).provisional(m.guess);
        rules = rules.prefix(m.prefix.clone(), rate);
        if let Some(tpm) = m.tokens_per_minute {
            rules = rules.prefix(tokens_resource(&m.prefix), Limit::per_minute(tpm.max(1)));
        }
        if let Some(n) = m.max_in_flight {
            rules = rules.prefix(inflight_resource(&m.prefix), Limit::in_flight(n.max(1)));
        }
    }
    for a in &config.apis {
        let name = sluice_limit::api_resource(&a.name);
        rules = rules.exact(name.clone(), rate_limit(a.requests_per_second, a.burst));
        if let Some(n) = a.max_in_flight {
            rules = rules.exact(inflight_resource(&name), Limit::in_flight(n.max(1)));
        }
    }
    rules.prefix(
        sluice_limit::SESSION_PREFIX,
        Limit::new(
            config.sessions.requests.max(1),
            Duration::from_secs(config.sessions.window_seconds.max(1)),
        )
        .algorithm(Algorithm::SlidingWindow),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_scoped_by_tenant() {
        assert_eq!(session_resource("acme", "t1"), "session:acme:t1");
        assert_eq!(scoped("acme", "session:t1"), "session:acme:t1");
        assert_eq!(scoped("acme", "openai/gpt-4o"), "openai/gpt-4o");
        assert_eq!(
            unscoped("acme", "session:acme:t1").as_deref(),
            Some("session:t1")
        );
        assert_eq!(unscoped("globex", "session:acme:t1"), None);
        assert_eq!(
            unscoped("globex", "api:slack").as_deref(),
            Some("api:slack")
        );
        // `a:b`'s thread `c` and `a`'s thread `b:c` are apart.
        assert_ne!(session_resource("a:b", "c"), session_resource("a", "b:c"));
        assert_eq!(unscoped("a", &session_resource("a:b", "c")), None);
        // A tenant cannot name its way into another's scope.
        let sneaky = scoped("globex", "session:acme:t1");
        assert_eq!(unscoped("acme", &sneaky), None);
    }

    #[test]
    fn embedded_model_rates_are_guesses_and_configured_ones_ceilings() {
        let mut config = Config::default();
        let guess = rules(&config).resolve("openai/gpt-4o-mini").unwrap();
        assert!(guess.is_provisional(), "{guess:?}");
        let own = config.models.iter_mut().find(|m| m.prefix == "openai/");
        let own = own.expect("a default rule for openai/");
        own.requests_per_second = 50.0;
        own.guess = false;
        let ceiling = rules(&config).resolve("openai/gpt-4o-mini").unwrap();
        assert!(!ceiling.is_provisional(), "{ceiling:?}");
        let api = rules(&config).resolve("api:slack").unwrap();
        assert!(!api.is_provisional(), "{api:?}");
    }

    #[test]
    fn fractional_rates_become_whole_windows() {
        assert_eq!(rate_limit(3.0, 10), Limit::per_second(3).burst(10));
        assert_eq!(
            rate_limit(2.5, 8),
            Limit::new(25, Duration::from_secs(10)).burst(8)
        );
        assert_eq!(
            rate_limit(0.5, 1),
            Limit::new(5, Duration::from_secs(10)).burst(1)
        );
    }
}
