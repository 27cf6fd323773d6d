//! The gateway's configuration: one TOML file over embedded defaults that
//! reproduce the seed's tables, with `SLUICE_`-prefixed environment
//! overrides. Unknown keys are errors that name the key and where it came
//! from.

mod audit;
mod cache;
mod defaults;
mod jobs;
mod keys;
mod ledger;
mod load;
pub(crate) mod mcp;
pub(crate) mod otel;
mod pools;
mod secrets;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sluice_admit::{PoolConfig, QueueConfig};

pub use crate::trace::{Retention, Rotation};

pub use audit::AuditConfig;
pub use cache::{ApiCache, CacheSettings, ModelCache, ModelRule};
pub(crate) use jobs::redact_url;
pub use jobs::{CallbacksConfig, JobsConfig, QueueSettings, SQLITE, StoreLocation};
pub use keys::{KeysConfig, WITH_JOBS};
pub use ledger::{
    BodiesKept, Dollars, LedgerConfig, MAX_BODY_BYTES, PriceConfig, PricingConfig,
    RequestLogConfig, catalog, price_table,
};
pub(crate) use load::validate::jobs as validate_jobs;
pub use load::{ConfigError, Source, explain, load, load_str};
pub use mcp::{McpConfig, McpServerConfig};
pub use otel::{OtelSettings, OtlpProtocol};
pub use pools::{DEPLOYMENT_PREFIX, Deployment, MAX_DEPLOYMENTS, MAX_POOLS, ModelPool, Strategy};
pub use secrets::Secrets;

/// Everything `sluice serve` needs. `Config::default()` is the embedded
/// defaults: it runs with no file at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the gateway listens.
    pub listen: SocketAddr,
    /// Where the gateway keeps its data (traces, later jobs and usage).
    pub data_dir: PathBuf,
    /// Bearer token for admin calls (`PUT /v1/limits/{resource}`, the
    /// queue-wide job calls). Without one, admin calls are refused.
    pub admin_token: Option<String>,
    /// Largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// A request's deadline when it does not send `x-sluice-timeout-ms`.
    pub default_timeout_ms: u64,
    /// The longest deadline a request may ask for.
    pub max_timeout_ms: u64,
    /// Model providers, merged by name over the defaults (openai, anthropic,
    /// google, deepseek, minimax).
    pub providers: Vec<ProviderConfig>,
    /// Per-model limits, merged by prefix over the seed's table.
    pub models: Vec<ModelLimits>,
    /// SaaS APIs reachable under `/proxy/{api}/…`, merged by name over the
    /// seed's (slack, github, gmail, …).
    pub apis: Vec<ApiConfig>,
    /// Tenants by API key. With none, `x-sluice-workspace` names the tenant
    /// and no key is required.
    pub tenants: Vec<TenantConfig>,
    /// The per-session limit (sessions are named by `x-sluice-thread`).
    pub sessions: SessionLimits,
    /// The admission queue (seed: 50 per tenant, 200 in all, 10 running).
    pub queue: QueueConfig,
    /// Concurrency pools by workload: `model`, `api`, `default`.
    pub bulkheads: BTreeMap<String, PoolConfig>,
    /// Retries of upstream calls.
    pub retry: RetryConfig,
    /// Fallback chains: model → models to try when it is exhausted or paused.
    pub fallbacks: BTreeMap<String, Vec<String>>,
    /// Capacity pools: one model name over several deployments, each
    /// paced to its own limit (`docs/pools.md`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<ModelPool>,
    /// Other names for models (`fast = "openai/gpt-4o-mini"`), for clients
    /// that cannot send a prefixed name; a target may be a pool.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, String>,
    /// Token estimates for tokens/min limits.
    pub tokens: TokenConfig,
    /// How 429s cut capacity and how it recovers.
    pub adaptive: AdaptiveSettings,
    /// The limiter API for agents that call upstreams themselves.
    pub limits_api: LimitsApiConfig,
    /// Request traces.
    pub trace: TraceConfig,
    /// Prometheus metrics.
    pub metrics: MetricsConfig,
    /// Graceful shutdown.
    pub shutdown: ShutdownConfig,
    /// The HTTP server: timeouts and the connection cap.
    pub http: HttpConfig,
    /// Distributed mode: with this set, every limit (models, APIs,
    /// tenants, sessions) is shared by all replicas through Redis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisSettings>,
    /// Durable jobs: the store, retention and queues.
    pub jobs: JobsConfig,
    /// Tenants, API keys and tiers managed at run time.
    pub keys: KeysConfig,
    /// The response cache.
    pub cache: CacheSettings,
    /// OpenTelemetry export over OTLP; off without the section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otel: Option<OtelSettings>,
    /// The usage ledger: a record of every call and what it cost.
    pub ledger: LedgerConfig,
    /// What the request log keeps besides each call's figures: redacted
    /// bodies (off by default).
    pub request_log: RequestLogConfig,
    /// Model prices over the shipped table (`crates/usage/prices.json`),
    /// by model prefix: `[prices."openai/gpt-4o"] input = "2.50"`.
    pub prices: BTreeMap<String, PriceConfig>,
    /// Where prices and context windows come from under `[prices]` and
    /// the hand-checked table: the shipped price map, a file, or none.
    pub pricing: PricingConfig,
    /// The live dashboard (`/ui`, `GET /v1/dashboard`, `sluice top`).
    pub ui: UiConfig,
    /// The audit trail of administrative acts.
    pub audit: AuditConfig,
    /// MCP servers behind `/mcp` (docs/mcp.md); none by default.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServerConfig>,
    /// The `/mcp` endpoint.
    pub mcp: McpConfig,
    /// The values of the credential variables named above, read when the
    /// configuration was loaded; never serialized.
    #[serde(skip)]
    pub secrets: Secrets,
}

/// `[redis]`: limits shared by several gateway replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// `exact` (every decision in Redis) or `leased` (blocks of tokens
    /// spent locally; see docs/distributed.md for the bound).
    #[serde(default = "redis_mode")]
    pub mode: String,
    /// Put before every key and channel.
    #[serde(default = "redis_prefix")]
    pub prefix: String,
    /// The longest one Redis call may take before Redis counts as down.
    #[serde(default = "redis_timeout")]
    pub timeout_ms: u64,
    /// `fail_open` (each replica limits on its 1/N share while Redis is
    /// away) or `fail_closed` (429 with Retry-After).
    #[serde(default = "redis_failure")]
    pub failure: String,
    /// This replica's id on the capacity bus (default: random).
    #[serde(default)]
    pub replica_id: Option<String>,
    /// In-flight slots held by a replica that died come back after this.
    #[serde(default = "redis_lease_ttl")]
    pub lease_ttl_ms: u64,
    /// Leased mode: how long a block of tokens may be spent locally.
    #[serde(default = "redis_block_ttl")]
    pub block_ttl_ms: u64,
}

impl RedisSettings {
    /// Redis at `url` with every other setting at its default.
    pub fn new(url: impl Into<String>) -> Self {
        RedisSettings {
            url: url.into(),
            mode: redis_mode(),
            prefix: redis_prefix(),
            timeout_ms: redis_timeout(),
            failure: redis_failure(),
            replica_id: None,
            lease_ttl_ms: redis_lease_ttl(),
            block_ttl_ms: redis_block_ttl(),
        }
    }
}

fn redis_mode() -> String {
    "exact".into()
}

fn redis_prefix() -> String {
    "sluice:".into()
}

fn redis_timeout() -> u64 {
    250
}

fn redis_failure() -> String {
    "fail_open".into()
}

fn redis_lease_ttl() -> u64 {
    30_000
}

fn redis_block_ttl() -> u64 {
    100
}

/// How a provider is spoken to (defined with the usage it reports).
pub use sluice_usage::WireFormat;

/// A model provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The provider's name; models named `{name}/…` route here.
    pub name: String,
    /// The API base, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The environment variable holding the API key (never logged).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Whether that key serves tenants without a key of their own for this
    /// provider (`[tenants.providers.{name}]`); if not, they are refused.
    #[serde(default = "yes")]
    pub shared_auth: bool,
    /// The wire format.
    #[serde(default)]
    pub format: WireFormat,
    /// Whether `{name}/` is stripped from the model name sent upstream
    /// (true for direct providers; false for an OpenRouter-style upstream
    /// that expects `provider/model`).
    #[serde(default = "yes")]
    pub strip_prefix: bool,
    /// More model prefixes routed to this provider (besides `{name}/`).
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// Whether it takes a key (`key`, the default) or none (`none`: a
    /// local vLLM or Ollama). A provider that takes a key and has none
    /// (its `api_key_env` unset) is named in a warning at start-up, and a
    /// call to it is refused with 503 `provider_not_configured` instead of
    /// being sent without one.
    #[serde(default)]
    pub auth: ProviderAuth,
}

/// How a provider is authenticated (see [`ProviderConfig::auth`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderAuth {
    /// An API key: the one `api_key_env` names, or a tenant's own.
    #[default]
    Key,
    /// No key is sent.
    None,
}

/// Limits of the models under a prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelLimits {
    /// `openai/` (a prefix) or `openai/gpt-4o` (a model); longest wins.
    pub prefix: String,
    /// Requests per second (fractions allowed).
    pub requests_per_second: f64,
    /// Requests allowed in a burst.
    pub burst: u64,
    /// Tokens per minute (prompt + completion), if limited.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
    /// Calls in flight at once, if limited.
    #[serde(default)]
    pub max_in_flight: Option<u64>,
    /// Whether `requests_per_second` and `burst` are a guess (the embedded
    /// defaults' are): then a provider that announces a higher rate in its
    /// rate-limit headers is followed above them. A rate you configure
    /// yourself is a ceiling: announcements only ever lower it.
    #[serde(default)]
    pub guess: bool,
}

/// A SaaS API behind `/proxy/{name}/…`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// The API's name (`slack`); its limiter resource is `api:{name}`.
    pub name: String,
    /// The only base URL requests go to.
    pub base_url: String,
    /// Requests per second (fractions allowed).
    pub requests_per_second: f64,
    /// Requests allowed in a burst.
    pub burst: u64,
    /// Calls in flight at once, if limited.
    #[serde(default)]
    pub max_in_flight: Option<u64>,
    /// Tool-name prefixes that call this API (`SLACK_`), for the limiter API.
    #[serde(default)]
    pub tool_prefixes: Vec<String>,
    /// The environment variable holding a bearer token to send upstream.
    #[serde(default)]
    pub auth_env: Option<String>,
    /// Whether that token serves tenants without a token of their own for
    /// this API (`[tenants.apis.{name}]`); if not, they are refused.
    #[serde(default = "yes")]
    pub shared_auth: bool,
}

/// A tenant (workspace) and its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// The workspace name.
    pub name: String,
    /// Its API key, inline (prefer `api_key_env`).
    #[serde(default, skip_serializing)]
    pub api_key: Option<String>,
    /// The environment variable holding its API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Its weight in fair queuing (default 1).
    #[serde(default = "one")]
    pub weight: u32,
    /// Its own credentials for APIs, by API name
    /// (`[tenants.apis.slack] auth_env = "ACME_SLACK_TOKEN"`), sent
    /// instead of the API's shared one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub apis: BTreeMap<String, TenantApi>,
    /// Its own keys for model providers, by provider name
    /// (`[tenants.providers.openai] api_key_env = "ACME_OPENAI_KEY"`),
    /// sent instead of the provider's shared one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, TenantProvider>,
    /// Whether its requests may ask for `high` priority
    /// (`x-sluice-priority: high`, an acquire's `"priority": "high"`);
    /// default false: a tenant's `high` is refused (403), so that no
    /// tenant can jump every other tenant's queue on its own say-so.
    #[serde(default)]
    pub high_priority: bool,
    /// The MCP tools it may see and call, as globs over `{server}.{tool}`
    /// (`github.*`, `sim.GMAIL_*`); none set: all. A tool outside it is
    /// not listed, and calling it is refused naming this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
}

impl TenantConfig {
    /// A tenant with an inline key, weight 1 and no upstream credentials
    /// of its own.
    pub fn new(name: impl Into<String>, api_key: impl Into<String>) -> Self {
        TenantConfig {
            name: name.into(),
            api_key: Some(api_key.into()),
            api_key_env: None,
            weight: 1,
            apis: BTreeMap::new(),
            providers: BTreeMap::new(),
            high_priority: false,
            mcp: None,
        }
    }
}

/// A tenant's own credential for one API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantApi {
    /// The environment variable holding its bearer token (set when the
    /// configuration is loaded).
    pub auth_env: String,
}

/// A tenant's own key for one model provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantProvider {
    /// The environment variable holding its API key (set when the
    /// configuration is loaded).
    pub api_key_env: String,
}

/// The per-session sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionLimits {
    /// Requests per window (seed `RATE_LIMIT_REQUESTS`: 10).
    pub requests: u64,
    /// The window (seed `RATE_LIMIT_WINDOW_SECONDS`: 60).
    pub window_seconds: u64,
}

/// Upstream retries: exponential backoff with full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts in all, the first included (seed: 3).
    pub max_attempts: u32,
    /// The first backoff (seed: 1 s).
    pub initial_backoff_ms: u64,
    /// The longest backoff (seed: 10 s).
    pub max_backoff_ms: u64,
    /// The longest upstream Retry-After honoured; past it the client gets a
    /// fast 429 instead of a frozen request.
    pub max_retry_after_ms: u64,
    /// Per-attempt timeout for the upstream's response headers.
    pub attempt_timeout_ms: u64,
    /// An attempt is not sent with less than this left before the
    /// request's deadline (default 50 ms): the request gets 504
    /// `deadline_exceeded` and what it took from the limiter goes back.
    /// Waits for the limiter end this long before the deadline too.
    pub min_time_left_ms: u64,
}

/// Token estimates, reserved before a call and settled after it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenConfig {
    /// Completion tokens reserved when a request sets no `max_tokens`.
    pub default_max_tokens: u64,
    /// Characters per prompt token, for the estimate.
    pub chars_per_token: u64,
    /// The most input tokens, and the most output tokens, one call is
    /// billed for whatever its upstream reports (default 10,000,000);
    /// output is bounded by the request's own limit too.
    pub max_call_tokens: u64,
    /// The share (0 to 1) of its reserved output tokens that a stream
    /// without its final usage (cut short, or ended without reporting) is
    /// charged at least, in budgets and the ledger: the upstream bills
    /// what it wrote before the cut, hidden reasoning included, which
    /// the stream does not show. Default 1: the worst case, over and
    /// never under.
    pub cut_stream_share: f64,
}

/// How a 429 is read (see [`AdaptiveSettings::policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdaptivePolicy {
    /// Cut only on evidence; follow announced rates.
    #[default]
    Evidence,
    /// Cut on every 429; recover ×`recovery_factor` per interval.
    Seed,
}

/// Adaptive control (see `sluice_limit::AdaptiveConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveSettings {
    /// How a 429 is read: `evidence` (a configured limit is the
    /// provider's: a 429 pauses, resynchronises and widens the jitter
    /// margin, and only 429s that keep coming cut) or `seed` (every 429
    /// cuts by `reduce_factor`).
    pub policy: AdaptivePolicy,
    /// Refill held back before each call to a token bucket or GCRA limit,
    /// in milliseconds, so that calls reaching the provider with network
    /// jitter do not beat its own refill. Costs about `margin × rate`
    /// calls once per busy period, never the rate.
    pub jitter_margin_ms: u64,
    /// The widest the margin grows after 429s that were timing collisions.
    pub max_jitter_margin_ms: u64,
    /// 429s in a row, on calls let go after the previous one was seen,
    /// that prove a limit lower than the configured one.
    pub strikes: u32,
    /// Capacity × this on a 429 (seed policy) or on proof of a lower limit
    /// (evidence policy).
    pub reduce_factor: f64,
    /// Capacity × this at each recovery step.
    pub recovery_factor: f64,
    /// Seconds between recovery steps.
    pub recovery_interval_seconds: u64,
    /// The longest pause a Retry-After imposes, in seconds.
    pub max_pause_seconds: u64,
}

/// The limiter API.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsApiConfig {
    /// Grants not released within this are released for the caller.
    pub lease_ttl_ms: u64,
    /// The longest an acquire may wait.
    pub max_wait_ms: u64,
    /// Grants one tenant may hold at once; past it acquires get 429.
    pub max_held_per_tenant: usize,
    /// A release's `actual_cost` is cut to this multiple of the cost
    /// reserved (default 2). Whatever it is, no bucket ever owes more than
    /// one window's capacity.
    pub max_settle_multiple: u64,
}

/// Request traces as JSON lines under `{dir}/{workspace}/{period}.jsonl`,
/// kept within a size, a file count and an age.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TraceConfig {
    /// Whether traces are written.
    pub enabled: bool,
    /// Where; default `{data_dir}/traces`.
    pub dir: Option<PathBuf>,
    /// Traces buffered for the writer; past it traces are counted as
    /// dropped rather than slowing requests.
    pub buffer: usize,
    /// `day` or `hour`: how often each workspace starts a new file (UTC).
    pub rotate: Rotation,
    /// A file that reaches this many bytes is followed by the period's
    /// next one (`{period}.1.jsonl`, …).
    pub max_file_bytes: u64,
    /// Past this many bytes in the directory's files, the oldest files
    /// are removed.
    pub max_total_bytes: u64,
    /// Past this many files, the oldest are removed.
    pub max_files: usize,
    /// Files whose newest trace started more than this many hours before
    /// the newest trace written are removed; 0: no age limit.
    pub max_age_hours: u64,
    /// Files the writer keeps open at once.
    pub max_open_files: usize,
}

impl TraceConfig {
    /// The caps and rotation of the trace directory.
    pub fn retention(&self) -> Retention {
        Retention {
            rotate: self.rotate,
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_total_bytes,
            max_files: self.max_files,
            max_age: (self.max_age_hours > 0)
                .then(|| std::time::Duration::from_secs(self.max_age_hours.saturating_mul(3_600))),
            max_open_files: self.max_open_files,
        }
    }
}

/// Prometheus metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Label request metrics by tenant (off: cardinality).
    pub tenant_labels: bool,
    /// Bearer token a scraper sends to `GET /metrics` (the admin token
    /// works too). Without one, an open gateway (no tenants) lets anyone
    /// scrape, and one with tenants takes the admin token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The gauges that cost a query to read (jobs by queue and state,
    /// limiter tokens, which in distributed mode are read from Redis) are
    /// read again at most this often, however often `/metrics` is
    /// scraped; in between a scrape shows the last values read.
    pub refresh_interval_ms: u64,
}

/// `[ui]`: the live dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// Serve `/ui` and `/v1/dashboard*`, and sample once a second.
    pub enabled: bool,
    /// A read-only token for the dashboard, given inline (the admin token
    /// works too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The environment variable that holds the read-only token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Seconds of history kept for the charts (one point a second).
    pub history_seconds: u64,
    /// Live streams served at once; past it a new one gets 503.
    pub max_streams: usize,
}

/// The HTTP server's own bounds, against clients that are slow on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// A connection must send a request's whole head within this, counted
    /// from when the server starts waiting for it (an idle keep-alive
    /// connection is closed after it too).
    pub header_read_timeout_ms: u64,
    /// A request's body must arrive within this, counted once the caller
    /// is authenticated and the handler starts reading it.
    pub body_read_timeout_ms: u64,
    /// A connection whose client takes none of the bytes the server has
    /// to write for this long is closed, and the answer it was given
    /// (its stream, its pool slot, its grant, its upstream connection)
    /// with it: a client that stops reading cannot hold them.
    pub write_timeout_ms: u64,
    /// Connections served at once; past it new ones wait in the listen
    /// backlog until one closes.
    pub max_connections: usize,
    /// Threads that accept and serve connections, each with a runtime and
    /// an upstream connection pool of its own, so that a request, its
    /// upstream call and its answer stay on one thread (no wake-up of
    /// another thread on the way: `docs/gateway.md`, "Wake-ups"). 0, the
    /// default: one per CPU.
    pub threads: usize,
}

impl HttpConfig {
    /// `threads`, with 0 read as one per CPU.
    pub fn serving_threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }
}

/// Graceful shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// The one grace after SIGTERM: requests in flight and running jobs
    /// drain together within it; what is still running then is cut (jobs
    /// go back to their queue with no attempt used). Default 25 s, under
    /// Kubernetes' 30 s `terminationGracePeriodSeconds`.
    pub drain_timeout_ms: u64,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

impl Config {
    /// The model limits that apply to `model` (longest prefix).
    pub(crate) fn model_limits(&self, model: &str) -> Option<&ModelLimits> {
        self.models
            .iter()
            .filter(|m| model.starts_with(m.prefix.as_str()))
            .max_by_key(|m| m.prefix.len())
    }

    /// The trace directory in force.
    pub fn trace_dir(&self) -> PathBuf {
        self.trace
            .dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("traces"))
    }

    /// The provider serving `model` (`openai/gpt-4o` → openai), by longest
    /// prefix.
    pub fn provider_for(&self, model: &str) -> Option<&ProviderConfig> {
        self.provider_index(model).map(|i| &self.providers[i])
    }

    /// Where in `providers` [`Config::provider_for`]'s provider is.
    pub fn provider_index(&self, model: &str) -> Option<usize> {
        // On every model call: the length of each matching prefix (`name/`
        // or a configured one), compared without building a string.
        self.providers
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                let by_name = model
                    .strip_prefix(p.name.as_str())
                    .filter(|rest| rest.starts_with('/'))
                    .map(|_| p.name.len() + 1);
                let by_prefix = p
                    .prefixes
                    .iter()
                    .filter(|prefix| model.starts_with(prefix.as_str()))
                    .map(String::len);
                by_name
                    .into_iter()
                    .chain(by_prefix)
                    .map(move |len| (len, i))
            })
            .max_by_key(|&(len, _)| len)
            .map(|(_, i)| i)
    }

    /// The API named `name`.
    pub fn api(&self, name: &str) -> Option<&ApiConfig> {
        self.apis.iter().find(|a| a.name == name)
    }
}
