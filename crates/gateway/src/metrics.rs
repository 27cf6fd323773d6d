//! Prometheus metrics: one process-wide recorder, explicit histogram
//! buckets, help text with units, and label values that cannot grow without
//! bound.
//!
//! The gateway serves `GET /metrics` itself from [`Metrics::render`]; the
//! exporter's own HTTP listener and push gateway are compiled out.
//!
//! # Labels
//!
//! Every label is bounded. Labels whose values the gateway writes itself
//! (`route`, `reason`, `outcome`, `priority`) take `&'static str`, so a
//! request string cannot become one. Labels that name configured things
//! (`model`, `resource`, `provider`, `tenant`, fallback `from`/`to`) take
//! `&str`: callers pass the name the gateway configured (the model's
//! configured prefix or the routed model, the limiter resource, the provider
//! name), never a string copied from a request. As a last line of defence,
//! those values pass [`LabelValues`]: at most [`MAX_LABEL_VALUES`] distinct
//! values per process, each at most [`MAX_LABEL_LEN`] bytes; the rest are
//! reported as `_other`.
//!
//! # One recorder per process
//!
//! A `metrics` recorder is global, and tests start several gateways in one
//! process, so [`Metrics::install`] installs the recorder once and hands
//! every caller a clone of its handle. Counters therefore add up across
//! gateways in the same process.

mod handles;
mod labels;
mod refresh;

use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use metrics::{
    Counter, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use handles::Handles;
pub use labels::LabelValues;

/// The handle that `$macro!($args)` names, resolved once per values of
/// the `$key` labels (see [`Handles`]).
macro_rules! resolved {
    ($kind:ident, $macro:ident, [$($key:expr),+], $($args:tt)*) => {{
        static BY_LABELS: LazyLock<Handles<$kind>> = LazyLock::new(Handles::new);
        BY_LABELS.get(&[$($key.as_bytes()),+], || $macro!($($args)*))
    }};
}

pub(crate) use refresh::Refresh;

/// Request and upstream latency: API proxies and the limiter API answer in
/// milliseconds, model calls take seconds to minutes, and 120 s is the
/// longest upstream timeout a gateway should allow.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
    120.0,
];

/// Queue and limiter waits: most requests pass at once (the 1 ms bucket
/// tells "no wait" apart), a refill at 2 req/s takes 0.5 s, and request
/// deadlines keep waits under a minute.
const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Upstream `Retry-After`: providers ask for anything from a few hundred
/// milliseconds (request buckets) to a minute (tokens-per-minute windows);
/// past 120 s the gateway answers 429 rather than wait.
const RETRY_AFTER_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0];

/// How often histogram samples are folded into buckets when nobody scrapes,
/// so that memory stays bounded between scrapes.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Distinct values a configured-name label may take in one process.
pub const MAX_LABEL_VALUES: usize = 1024;
/// Longest label value kept; longer ones are reported as `_other`.
pub const MAX_LABEL_LEN: usize = 128;
/// What a label value past the bounds is reported as.
pub const OTHER: &str = "_other";

/// The gateway's metrics: a handle to the process-wide Prometheus recorder.
#[derive(Clone, Debug)]
pub struct Metrics {
    handle: PrometheusHandle,
    tenant_labels: bool,
}

/// Why metrics could not be installed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum MetricsError {
    /// Another global `metrics` recorder was installed first, or the
    /// bucket configuration was rejected.
    #[error("cannot install the prometheus recorder")]
    Install(#[source] Arc<BuildError>),
}

static RECORDER: OnceLock<Result<PrometheusHandle, MetricsError>> = OnceLock::new();

impl Metrics {
    /// Installs the process-wide recorder on first use and returns a handle
    /// to it; later calls return the same recorder. `tenant_labels` adds a
    /// `tenant` label to [`Metrics::request`] for this handle only.
    ///
    /// # Errors
    /// [`MetricsError::Install`] if another global recorder was installed
    /// first (then every call fails the same way).
    pub fn install(tenant_labels: bool) -> Result<Metrics, MetricsError> {
        let handle = RECORDER.get_or_init(build_and_install).clone()?;
        Ok(Metrics {
            handle,
            tenant_labels,
        })
    }

    /// The Prometheus text exposition of every metric recorded so far.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Counts a finished request on `sluice_requests_total{route,model,status}`,
    /// plus `tenant` when tenant labels are on and `tenant` is given. `model`
    /// is the configured model the request was routed to, or `"-"` when
    /// there was none.
    pub fn request(&self, route: &'static str, model: &str, status: u16, tenant: Option<&str>) {
        static BY_LABELS: LazyLock<Handles<Counter>> = LazyLock::new(Handles::new);
        let resolve = |tenant: Option<&str>| {
            let (model, status) = (bounded(model), status.to_string());
            match tenant {
                Some(t) => counter!("sluice_requests_total", "route" => route, "model" => model,
                    "status" => status, "tenant" => bounded(t)),
                None => counter!("sluice_requests_total", "route" => route, "model" => model,
                    "status" => status),
            }
        };
        let code = status.to_be_bytes();
        let labels = [route.as_bytes(), model.as_bytes(), &code];
        match tenant.filter(|_| self.tenant_labels) {
            // Tenants are many: their counters are resolved each time.
            Some(t) => resolve(Some(t)),
            None => BY_LABELS.get(&labels, || resolve(None)),
        }
        .increment(1);
    }
}

fn build_and_install() -> Result<PrometheusHandle, MetricsError> {
    let install = || -> Result<PrometheusHandle, BuildError> {
        let mut builder = PrometheusBuilder::new();
        for (name, buckets) in [
            ("sluice_request_duration_seconds", LATENCY_BUCKETS),
            ("sluice_upstream_latency_seconds", LATENCY_BUCKETS),
            ("sluice_mcp_tool_duration_seconds", LATENCY_BUCKETS),
            ("sluice_queue_wait_seconds", WAIT_BUCKETS),
            ("sluice_limiter_wait_seconds", WAIT_BUCKETS),
            ("sluice_retry_after_seconds", RETRY_AFTER_BUCKETS),
            (sluice_jobs::metrics::DURATION, LATENCY_BUCKETS),
            (sluice_jobs::metrics::WAIT, WAIT_BUCKETS),
            (sluice_jobs_http::metrics::RETRY_AFTER, RETRY_AFTER_BUCKETS),
        ] {
            builder = builder.set_buckets_for_metric(Matcher::Full(name.into()), buckets)?;
        }
        builder.install_recorder()
    };
    let handle = install().map_err(|e| MetricsError::Install(Arc::new(e)))?;
    describe();
    let upkeep = handle.clone();
    // The recorder lives as long as the process, so its upkeep does too; a
    // thread rather than a task because tests run many short runtimes.
    let spawned = std::thread::Builder::new()
        .name("sluice-metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                upkeep.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics upkeep thread not started; histograms drain on scrape only");
    }
    Ok(handle)
}

/// The name of every metric family the gateway exports (for the checks
/// of what alerts and dashboards name).
pub fn families() -> impl Iterator<Item = &'static str> {
    FAMILIES.iter().map(|&(name, ..)| name)
}

/// What a family is, for describing it and for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric family: name, kind, unit, help text (the unit is in the
/// text too, because the exposition's HELP line does not carry it).
#[rustfmt::skip] // a table: one family per entry reads better than rustfmt's layout
const FAMILIES: &[(&str, Kind, Unit, &str)] = &[
    ("sluice_requests_total", Kind::Counter, Unit::Count,
        "Requests answered, by route, configured model and HTTP status (requests)."),
    ("sluice_request_duration_seconds", Kind::Histogram, Unit::Seconds,
        "Time from request arrival to the end of the response, by route (seconds)."),
    ("sluice_upstream_429_total", Kind::Counter, Unit::Count,
        "429 responses received from upstreams, by limiter resource (responses)."),
    ("sluice_retry_after_seconds", Kind::Histogram, Unit::Seconds,
        "Retry-After values sent by upstreams (seconds)."),
    ("sluice_limiter_tokens_acquired_total", Kind::Counter, Unit::Count,
        "Limiter tokens granted, by resource (tokens)."),
    ("sluice_limiter_wait_seconds", Kind::Histogram, Unit::Seconds,
        "Time spent waiting for a limiter grant, by resource (seconds)."),
    ("sluice_limiter_refusals_total", Kind::Counter, Unit::Count,
        "Limiter acquisitions refused, by resource and reason (acquisitions)."),
    ("sluice_limiter_available_tokens", Kind::Gauge, Unit::Count,
        "Tokens available as of the last refresh, by resource; sessions left out (tokens)."),
    ("sluice_limiter_capacity", Kind::Gauge, Unit::Count,
        "Capacity of a resource after adaptive or manual changes (tokens per window)."),
    ("sluice_limiter_capacity_changes_total", Kind::Counter, Unit::Count,
        "Capacity changes, by resource and reason (changes)."),
    ("sluice_queue_depth", Kind::Gauge, Unit::Count,
        "Requests waiting in the admission queue, by priority (requests)."),
    ("sluice_queue_wait_seconds", Kind::Histogram, Unit::Seconds,
        "Time spent in the admission queue, by priority (seconds)."),
    ("sluice_queue_rejected_total", Kind::Counter, Unit::Count,
        "Requests refused admission, by reason (requests)."),
    ("sluice_budget_refusals_total", Kind::Counter, Unit::Count,
        "Model calls refused by a budget of their key or tenant, by scope (key, tenant) and reason (exceeded, too_large, unpriced, store) (requests)."),
    ("sluice_budget_warnings_total", Kind::Counter, Unit::Count,
        "Model calls admitted with a budget of their key or tenant at 80 % or more of a cap, by scope (requests)."),
    ("sluice_redis_degraded", Kind::Gauge, Unit::Count,
        "1 while Redis cannot be reached and shared limits follow the failure mode, else 0 (boolean)."),
    ("sluice_bulkhead_in_use", Kind::Gauge, Unit::Count,
        "Slots held in a bulkhead pool as of the last scrape, by pool (calls)."),
    ("sluice_bulkhead_waiting", Kind::Gauge, Unit::Count,
        "Calls waiting for a slot of a bulkhead pool (or of their tenant's share of it) as of the last scrape, by pool (calls)."),
    ("sluice_busy", Kind::Gauge, Unit::Count,
        "1 while the admission backlog exceeds twice the dispatch concurrency per waiting lane, else 0 (boolean)."),
    ("sluice_upstream_latency_seconds", Kind::Histogram, Unit::Seconds,
        "Time per upstream attempt until response headers, by provider (seconds)."),
    ("sluice_upstream_attempts_total", Kind::Counter, Unit::Count,
        "Upstream attempts, by provider and outcome (attempts)."),
    ("sluice_pool_attempts_total", Kind::Counter, Unit::Count,
        "Calls of a pooled model sent to each deployment, by pool, deployment and outcome (answered, failed, timeout, throttled, refused) (attempts)."),
    ("sluice_pool_circuit_open", Kind::Gauge, Unit::Count,
        "1 while a pool deployment's circuit is open or half open, else 0, by pool and deployment (boolean)."),
    ("sluice_retries_total", Kind::Counter, Unit::Count,
        "Upstream retries, by provider and reason (retries)."),
    ("sluice_fallbacks_total", Kind::Counter, Unit::Count,
        "Requests moved to a fallback model, by original and fallback model (requests)."),
    ("sluice_usage_clamped_total", Kind::Counter, Unit::Count,
        "Answers whose reported usage was above what the call could use (the request's output limit, tokens.max_call_tokens) and was clamped to it, by provider and the first field above (answers)."),
    ("sluice_stream_disconnects_total", Kind::Counter, Unit::Count,
        "Streams the client left before their end, by route (streams)."),
    ("sluice_traces_dropped_total", Kind::Counter, Unit::Count,
        "Request traces not written, by reason: buffer_full, closed or write_error (traces)."),
    ("sluice_otel_spans_exported_total", Kind::Counter, Unit::Count,
        "OpenTelemetry spans the OTLP collector accepted (spans)."),
    ("sluice_otel_spans_dropped_total", Kind::Counter, Unit::Count,
        "OpenTelemetry spans not exported, by reason: queue_full (otel.queue_size reached, or the exporter stopped), export_failed or rejected by the collector (spans)."),
    ("sluice_trace_files_removed_total", Kind::Counter, Unit::Count,
        "Trace files removed, oldest first, to keep within trace.max_files and trace.max_total_bytes (files)."),
    ("sluice_trace_bytes", Kind::Gauge, Unit::Bytes,
        "Bytes in the trace directory's files (bytes)."),
    ("sluice_trace_files", Kind::Gauge, Unit::Count,
        "Files in the trace directory (files)."),
    ("sluice_jobs_enqueued_total", Kind::Counter, Unit::Count,
        "Jobs stored by the jobs API, by queue and kind; idempotent replays not counted (jobs)."),
    ("sluice_jobs_idempotency_total", Kind::Counter, Unit::Count,
        "Enqueues with an Idempotency-Key, by result: hit (the original job answered) or miss (stored) (enqueues)."),
    ("sluice_jobs", Kind::Gauge, Unit::Count,
        "Jobs in the store, by queue and state, as of the last refresh (jobs)."),
    ("sluice_cache_lookups_total", Kind::Counter, Unit::Count,
        "Model requests by what the response cache did (hit, miss or bypass), by model (requests)."),
    ("sluice_cache_saved_tokens_total", Kind::Counter, Unit::Count,
        "Tokens not sent upstream because the cache answered, by model and kind: prompt or completion (tokens)."),
    ("sluice_cache_bytes", Kind::Gauge, Unit::Bytes,
        "Bytes the response cache's shared store holds, as of the last refresh (bytes)."),
    ("sluice_cache_entries", Kind::Gauge, Unit::Count,
        "Answers the response cache's shared store holds, as of the last refresh (entries)."),
    ("sluice_cache_evictions_total", Kind::Counter, Unit::Count,
        "Answers evicted from the in-memory cache to stay within cache.max_bytes (entries)."),
    ("sluice_cache_store_errors_total", Kind::Counter, Unit::Count,
        "Calls to the Redis cache that failed or timed out; each lookup was a miss (calls)."),
    ("sluice_usage_tokens_total", Kind::Counter, Unit::Count,
        "Tokens recorded in the usage ledger, by tenant, model and kind: prompt, completion, cached (of the prompt) or reasoning (of the completion); at most ledger.metric_labels tenants and models, the rest as _other (tokens)."),
    ("sluice_usage_cost_nanodollars_total", Kind::Counter, Unit::Count,
        "What calls recorded in the usage ledger cost, by tenant and model, from the price table (nanodollars)."),
    ("sluice_ledger_spilled_total", Kind::Counter, Unit::Count,
        "Ledger records that found the writer's queue full (or its store failing) and waited in the spill file; written back later (records)."),
    ("sluice_ledger_lost_total", Kind::Counter, Unit::Count,
        "Ledger records neither queued nor spilled (the spill file could not be written); each is logged whole (records)."),
    ("sluice_ledger_queued", Kind::Gauge, Unit::Count,
        "Ledger records waiting in the writer's queue (records)."),
    ("sluice_mcp_tool_calls_total", Kind::Counter, Unit::Count,
        "MCP tool calls through /mcp, by server, API (or mcp:{server} for a tool of no API) and status: 200 a result, 429 throttled, 5xx no result (calls)."),
    ("sluice_mcp_tool_duration_seconds", Kind::Histogram, Unit::Seconds,
        "Time an MCP tool call took through /mcp, queue and limiter waits included, by server (seconds)."),
    ("sluice_metrics_refresh_total", Kind::Counter, Unit::Count,
        "Refreshes of the gauges read from the job store and the limiter, at most one per metrics.refresh_interval_ms (refreshes)."),
];

fn describe() {
    sluice_jobs::metrics::describe();
    sluice_jobs_http::metrics::describe();
    for &(name, kind, unit, help) in FAMILIES {
        match kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
            Kind::Histogram => describe_histogram!(name, unit, help),
        }
    }
}

/// Counts an MCP tool call of `server` limited as `api`, answered with
/// `status` after `seconds`.
pub fn mcp_tool_call(server: &str, api: &str, status: u16, seconds: f64) {
    let server = bounded(server);
    counter!("sluice_mcp_tool_calls_total", "server" => server.clone(),
        "api" => bounded(api), "status" => status.to_string())
    .increment(1);
    histogram!("sluice_mcp_tool_duration_seconds", "server" => server).record(seconds);
}

/// Counts an upstream 429 against the limiter `resource`.
pub fn upstream_429(resource: &str) {
    counter!("sluice_upstream_429_total", "resource" => bounded(resource)).increment(1);
}

/// Records an upstream `Retry-After`, in seconds.
pub fn retry_after(seconds: f64) {
    histogram!("sluice_retry_after_seconds").record(seconds);
}

/// Records how long one request took end to end, in seconds.
pub fn request_duration(route: &'static str, seconds: f64) {
    resolved!(Histogram, histogram, [route], "sluice_request_duration_seconds", "route" => route)
        .record(seconds);
}

/// Counts `n` limiter tokens granted on `resource`.
pub fn tokens_acquired(resource: &str, n: u64) {
    resolved!(Counter, counter, [resource], "sluice_limiter_tokens_acquired_total", "resource" => bounded(resource))
        .increment(n);
}

/// Records a wait for a limiter grant on `resource`, in seconds.
pub fn limiter_wait(resource: &str, seconds: f64) {
    resolved!(Histogram, histogram, [resource], "sluice_limiter_wait_seconds", "resource" => bounded(resource))
        .record(seconds);
}

/// Counts a refused acquisition on `resource` (`reason` e.g. `timeout`,
/// `insufficient_capacity`, `paused`).
pub fn limiter_refusal(resource: &str, reason: &'static str) {
    counter!("sluice_limiter_refusals_total", "resource" => bounded(resource), "reason" => reason)
        .increment(1);
}

/// Sets whether Redis is unreachable (distributed mode).
pub fn redis_degraded(on: bool) {
    gauge!("sluice_redis_degraded").set(if on { 1.0 } else { 0.0 });
}

/// Sets the tokens available now on `resource`.
pub fn available_tokens(resource: &str, value: f64) {
    gauge!("sluice_limiter_available_tokens", "resource" => bounded(resource)).set(value);
}

/// Counts a capacity change on `resource` (`reason` e.g. `upstream_429`,
/// `recovery`, `admin`, `headers`) and sets its capacity gauge.
pub fn capacity_change(resource: &str, reason: &'static str, new_capacity: f64) {
    let resource = bounded(resource);
    counter!("sluice_limiter_capacity_changes_total", "resource" => resource.clone(), "reason" => reason)
        .increment(1);
    gauge!("sluice_limiter_capacity", "resource" => resource).set(new_capacity);
}

/// Sets the admission queue depth of a priority class (`high`, `normal`,
/// `low`: `sluice_admit::Priority::as_str`).
pub fn queue_depth(priority: &'static str, depth: usize) {
    gauge!("sluice_queue_depth", "priority" => priority).set(depth as f64);
}

/// Sets a bulkhead pool's slots held and calls waiting.
pub fn bulkhead(pool: &str, in_use: usize, waiting: usize) {
    let pool = pool.to_owned();
    gauge!("sluice_bulkhead_in_use", "pool" => pool.clone()).set(in_use as f64);
    gauge!("sluice_bulkhead_waiting", "pool" => pool).set(waiting as f64);
}

/// Records time spent in the admission queue, in seconds.
pub fn queue_wait(priority: &'static str, seconds: f64) {
    resolved!(Histogram, histogram, [priority], "sluice_queue_wait_seconds", "priority" => priority)
        .record(seconds);
}

/// Counts a request refused admission (`reason` e.g. `queue_full`,
/// `workspace_full`, `deadline`).
pub fn queue_rejected(reason: &'static str) {
    counter!("sluice_queue_rejected_total", "reason" => reason).increment(1);
}

/// Counts a call refused by a budget of `scope` (`key`, `tenant`) for
/// `reason` (`exceeded`, `too_large`, `unpriced`, `store`).
pub fn budget_refused(scope: &'static str, reason: &'static str) {
    counter!("sluice_budget_refusals_total", "scope" => scope, "reason" => reason).increment(1);
}

/// Counts a call admitted with a budget of `scope` at 80 % or more.
pub fn budget_warned(scope: &'static str) {
    counter!("sluice_budget_warnings_total", "scope" => scope).increment(1);
}

/// Sets the busy signal (the backlog exceeds twice the dispatch concurrency per waiting lane).
pub fn busy(busy: bool) {
    gauge!("sluice_busy").set(if busy { 1.0 } else { 0.0 });
}

/// Records one upstream attempt's latency until response headers, in seconds.
pub fn upstream_latency(provider: &str, seconds: f64) {
    resolved!(Histogram, histogram, [provider], "sluice_upstream_latency_seconds", "provider" => bounded(provider))
        .record(seconds);
}

/// Counts an upstream attempt (`outcome` e.g. `ok`, `429`, `5xx`,
/// `connect_error`, `timeout`).
pub fn upstream_attempt(provider: &str, outcome: &'static str) {
    resolved!(Counter, counter, [provider, outcome], "sluice_upstream_attempts_total", "provider" => bounded(provider), "outcome" => outcome)
        .increment(1);
}

/// Counts a pooled call's try on `deployment` (its limiter resource)
/// ending in `outcome`. Pools and deployments are the configuration's,
/// so the labels are bounded by it.
pub fn pool_attempt(pool: &str, deployment: &str, outcome: &'static str) {
    let deployment = deployment
        .strip_prefix(crate::config::DEPLOYMENT_PREFIX)
        .unwrap_or(deployment);
    counter!("sluice_pool_attempts_total", "pool" => bounded(pool), "deployment" => bounded(deployment), "outcome" => outcome)
        .increment(1);
}

/// Sets whether a pool deployment's circuit is open (or half open).
pub fn pool_circuit(pool: &str, deployment: &str, open: bool) {
    let deployment = deployment
        .strip_prefix(crate::config::DEPLOYMENT_PREFIX)
        .unwrap_or(deployment);
    gauge!("sluice_pool_circuit_open", "pool" => bounded(pool), "deployment" => bounded(deployment))
        .set(if open { 1.0 } else { 0.0 });
}

/// Counts a retry (`reason` e.g. `429`, `5xx`, `connect_error`, `timeout`).
pub fn retry(provider: &str, reason: &'static str) {
    counter!("sluice_retries_total", "provider" => bounded(provider), "reason" => reason)
        .increment(1);
}

/// Counts a move from model `from` to fallback model `to` (configured names).
pub fn fallback(from: &str, to: &str) {
    counter!("sluice_fallbacks_total", "from" => bounded(from), "to" => bounded(to)).increment(1);
}

/// Counts an answer of `provider` whose reported usage was clamped,
/// `field` the first figure above the bound.
pub fn usage_clamped(provider: &str, field: &'static str) {
    counter!("sluice_usage_clamped_total", "provider" => bounded(provider), "field" => field)
        .increment(1);
}

/// Counts a client that left a stream before its end.
pub fn stream_disconnect(route: &'static str) {
    counter!("sluice_stream_disconnects_total", "route" => route).increment(1);
}

/// Counts `n` traces that were not written (`reason`: `buffer_full`,
/// `closed`, `write_error`).
pub fn trace_dropped(reason: &'static str, n: u64) {
    counter!("sluice_traces_dropped_total", "reason" => reason).increment(n);
}

/// Counts a trace file removed to keep within the caps.
pub fn trace_file_removed() {
    counter!("sluice_trace_files_removed_total").increment(1);
}

/// Sets the bytes and the number of files in the trace directory.
pub fn trace_disk(bytes: u64, files: usize) {
    gauge!("sluice_trace_bytes").set(bytes as f64);
    gauge!("sluice_trace_files").set(files as f64);
}

/// Counts a refresh of the gauges read from the job store and the limiter.
pub fn metrics_refreshed() {
    counter!("sluice_metrics_refresh_total").increment(1);
}

/// Counts a job stored on `queue` (a configured queue) of `kind` (a known kind).
pub fn job_enqueued(queue: &str, kind: &str) {
    counter!("sluice_jobs_enqueued_total", "queue" => bounded(queue), "kind" => bounded(kind))
        .increment(1);
}

/// Counts an enqueue with an idempotency key: `hit` if it matched an
/// earlier job.
pub fn job_idempotency(hit: bool) {
    let result = if hit { "hit" } else { "miss" };
    counter!("sluice_jobs_idempotency_total", "result" => result).increment(1);
}

/// Sets the number of jobs of `queue` in `state` (`JobState::as_str`).
pub fn jobs(queue: &str, state: &'static str, n: u64) {
    gauge!("sluice_jobs", "queue" => bounded(queue), "state" => state).set(n as f64);
}

/// Counts a model request the cache missed or bypassed (`result` is
/// `miss` or `bypass`).
pub fn cache_lookup(result: &'static str, model: &str) {
    resolved!(Counter, counter, [result, model], "sluice_cache_lookups_total", "result" => result, "model" => bounded(model))
        .increment(1);
}

/// Counts a hit and the tokens it saved.
pub fn cache_hit(model: &str, saved: Option<sluice_usage::Usage>) {
    let model = bounded(model);
    counter!("sluice_cache_lookups_total", "result" => "hit", "model" => model.clone())
        .increment(1);
    if let Some(u) = saved {
        counter!("sluice_cache_saved_tokens_total", "model" => model.clone(), "kind" => "prompt")
            .increment(u.prompt_tokens);
        counter!("sluice_cache_saved_tokens_total", "model" => model, "kind" => "completion")
            .increment(u.completion_tokens);
    }
}

/// Sets the cache's size gauges and totals from its stats.
pub fn cache_stats(stats: &sluice_usage::cache::CacheStats) {
    gauge!("sluice_cache_bytes").set(stats.bytes as f64);
    gauge!("sluice_cache_entries").set(stats.entries as f64);
    counter!("sluice_cache_evictions_total").absolute(stats.evictions);
    counter!("sluice_cache_store_errors_total").absolute(stats.store_errors);
}

/// Counts the tokens and cost of a call recorded in the usage ledger;
/// `tenant` and `model` are already bounded by the ledger's own label
/// sets (`ledger.metric_labels`).
pub fn usage_spent(tenant: &str, model: &str, r: &sluice_ledger::Record) {
    for (kind, n) in [
        ("prompt", r.prompt_tokens),
        ("completion", r.completion_tokens),
        ("cached", r.cached_tokens),
        ("reasoning", r.reasoning_tokens),
    ] {
        // A zero is not recorded: a series appears once it counts.
        if n > 0 {
            resolved!(Counter, counter, [tenant, model, kind], "sluice_usage_tokens_total",
                "tenant" => bounded(tenant), "model" => bounded(model), "kind" => kind)
            .increment(n);
        }
    }
    if r.cost_nanos > 0 {
        resolved!(Counter, counter, [tenant, model], "sluice_usage_cost_nanodollars_total",
            "tenant" => bounded(tenant), "model" => bounded(model))
        .increment(r.cost_nanos);
    }
}

/// The ledger writer's counters.
pub fn ledger_writer(spilled: u64, lost: u64, queued: usize) {
    counter!("sluice_ledger_spilled_total").absolute(spilled);
    counter!("sluice_ledger_lost_total").absolute(lost);
    gauge!("sluice_ledger_queued").set(queued as f64);
}

/// Whether this process's recorder is ours and installed.
fn installed() -> bool {
    RECORDER.get().is_some_and(Result::is_ok)
}

fn bounded(value: &str) -> String {
    static VALUES: OnceLock<LabelValues> = OnceLock::new();
    VALUES
        .get_or_init(|| LabelValues::new(MAX_LABEL_VALUES))
        .admit(value)
}

#[cfg(test)]
mod tests;
