//! The embedded defaults: the seed's tables and numbers, so `sluice serve`
//! runs with no file at all. The provider and API tables live here, not in
//! `sluice-limit`, which has the algorithms only.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use sluice_admit::{PoolConfig, QueueConfig};
use sluice_limit::AdaptiveConfig;

use super::{
    AdaptiveSettings, ApiConfig, Config, HttpConfig, LimitsApiConfig, MetricsConfig, ModelLimits,
    ProviderConfig, RetryConfig, SessionLimits, ShutdownConfig, TokenConfig, TraceConfig, UiConfig,
    WireFormat,
};
use crate::trace::Rotation;

/// The built-in providers: (name, base URL, API-key variable, wire
/// format). The seed's five, then presets for the OpenAI-compatible
/// providers users name most; the local servers (Ollama, vLLM) take no key.
const PROVIDERS: &[(&str, &str, Option<&str>, WireFormat)] = &[
    (
        "openai",
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "anthropic",
        "https://api.anthropic.com/v1",
        Some("ANTHROPIC_API_KEY"),
        WireFormat::Anthropic,
    ),
    (
        // Gemini through Google's OpenAI-compatible endpoint.
        "google",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        Some("GEMINI_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "deepseek",
        "https://api.deepseek.com/v1",
        Some("DEEPSEEK_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "minimax",
        "https://api.minimax.io/v1",
        Some("MINIMAX_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "groq",
        "https://api.groq.com/openai/v1",
        Some("GROQ_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "mistral",
        "https://api.mistral.ai/v1",
        Some("MISTRAL_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "together",
        "https://api.together.xyz/v1",
        Some("TOGETHER_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "fireworks",
        "https://api.fireworks.ai/inference/v1",
        Some("FIREWORKS_API_KEY"),
        WireFormat::Openai,
    ),
    (
        // `openrouter/anthropic/claude-sonnet-4.5` goes upstream as
        // `anthropic/claude-sonnet-4.5`, OpenRouter's own name.
        "openrouter",
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
        WireFormat::Openai,
    ),
    (
        "ollama",
        "http://127.0.0.1:11434/v1",
        None,
        WireFormat::Openai,
    ),
    ("vllm", "http://127.0.0.1:8000/v1", None, WireFormat::Openai),
];

/// The seed's per-model limits: (prefix, requests/s, burst).
const MODEL_LIMITS: &[(&str, u64, u64)] = &[
    ("google/", 5, 15),
    ("anthropic/", 2, 8),
    ("deepseek/", 3, 10),
    ("minimax/", 3, 10),
    ("openai/", 3, 10),
];

/// The seed's limit for a model no prefix matches: (requests/s, burst).
const MODEL_FALLBACK: (u64, u64) = (2, 8);

/// The seed's per-API limits: (api, requests/s, burst).
const API_LIMITS: &[(&str, u64, u64)] = &[
    ("google_calendar", 2, 5),
    ("google_sheets", 2, 5),
    ("google_drive", 2, 5),
    ("gmail", 2, 5),
    ("github", 5, 15),
    ("linear", 3, 10),
    ("slack", 3, 10),
    ("clickup", 2, 5),
];

/// The seed's tool-name prefixes: (prefix, api), an API's longest first.
const TOOL_PREFIXES: &[(&str, &str)] = &[
    ("GOOGLEMAIL_", "gmail"),
    ("GMAIL_", "gmail"),
    ("GOOGLECALENDAR_", "google_calendar"),
    ("GOOGLESHEETS_", "google_sheets"),
    ("GOOGLEDRIVE_", "google_drive"),
    ("GITHUB_", "github"),
    ("LINEAR_", "linear"),
    ("SLACK_", "slack"),
    ("CLICKUP_", "clickup"),
    (DISCORD_TOOLS, DISCORD.0),
];

/// The seed's session window: this many requests in any this many seconds.
const SESSION_WINDOW: (u64, u64) = (10, 60);

/// Where the seed's APIs live.
const API_BASE_URLS: &[(&str, &str)] = &[
    ("google_calendar", "https://www.googleapis.com/calendar/v3"),
    ("google_sheets", "https://sheets.googleapis.com"),
    ("google_drive", "https://www.googleapis.com/drive/v3"),
    ("gmail", "https://gmail.googleapis.com"),
    ("github", "https://api.github.com"),
    ("linear", "https://api.linear.app"),
    ("slack", "https://slack.com/api"),
    ("clickup", "https://api.clickup.com/api/v2"),
];

/// Discord is not in the seed's tables: its documented global limit is 50
/// requests a second, and its tools are named `DISCORD_…` as the seed's are.
const DISCORD: (&str, &str, u64, u64) = ("discord", "https://discord.com/api/v10", 50, 50);
const DISCORD_TOOLS: &str = "DISCORD_";

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            data_dir: PathBuf::from("./sluice-data"),
            admin_token: None,
            max_body_bytes: 8 << 20,
            default_timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            providers: default_providers(),
            models: default_models(),
            apis: default_apis(),
            tenants: Vec::new(),
            sessions: SessionLimits::default(),
            queue: QueueConfig::SEED,
            bulkheads: default_bulkheads(),
            retry: RetryConfig::default(),
            fallbacks: BTreeMap::new(),
            pools: Vec::new(),
            aliases: BTreeMap::new(),
            tokens: TokenConfig::default(),
            adaptive: AdaptiveSettings::default(),
            limits_api: LimitsApiConfig::default(),
            trace: TraceConfig::default(),
            metrics: MetricsConfig::default(),
            ui: UiConfig::default(),
            shutdown: ShutdownConfig::default(),
            http: HttpConfig::default(),
            redis: None,
            jobs: super::JobsConfig::default(),
            keys: super::KeysConfig::default(),
            cache: super::CacheSettings::default(),
            otel: None,
            ledger: super::LedgerConfig::default(),
            request_log: super::RequestLogConfig::default(),
            prices: BTreeMap::new(),
            pricing: super::PricingConfig::default(),
            audit: super::AuditConfig::default(),
            mcp_servers: Vec::new(),
            mcp: super::McpConfig::default(),
            secrets: super::Secrets::default(),
        }
    }
}

fn default_providers() -> Vec<ProviderConfig> {
    PROVIDERS
        .iter()
        .map(|&(name, base_url, key_env, format)| ProviderConfig {
            name: name.to_owned(),
            base_url: base_url.to_owned(),
            api_key_env: key_env.map(str::to_owned),
            shared_auth: true,
            format,
            strip_prefix: true,
            prefixes: Vec::new(),
            // The local servers take no key.
            auth: match key_env {
                Some(_) => super::ProviderAuth::Key,
                None => super::ProviderAuth::None,
            },
        })
        .collect()
}

/// The seed's per-prefix table, then the fallback under the empty prefix
/// (every model name starts with it, and the longest prefix wins).
fn default_models() -> Vec<ModelLimits> {
    MODEL_LIMITS
        .iter()
        .copied()
        .chain([("", MODEL_FALLBACK.0, MODEL_FALLBACK.1)])
        .map(|(prefix, rate, burst)| ModelLimits {
            prefix: prefix.to_owned(),
            requests_per_second: rate as f64,
            burst,
            tokens_per_minute: None,
            max_in_flight: None,
            // The seed's numbers, not the provider's published ones.
            guess: true,
        })
        .collect()
}

fn default_apis() -> Vec<ApiConfig> {
    let api = |name: &str, base_url: &str, rate: u64, burst: u64| ApiConfig {
        name: name.to_owned(),
        base_url: base_url.to_owned(),
        requests_per_second: rate as f64,
        burst,
        max_in_flight: None,
        tool_prefixes: TOOL_PREFIXES
            .iter()
            .filter(|&&(_, a)| a == name)
            .map(|&(p, _)| p.to_owned())
            .collect(),
        auth_env: None,
        shared_auth: true,
    };
    API_LIMITS
        .iter()
        .map(|&(name, rate, burst)| {
            let base_url = API_BASE_URLS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, url)| *url)
                .expect("every seed API has a base URL");
            api(name, base_url, rate, burst)
        })
        .chain([api(DISCORD.0, DISCORD.1, DISCORD.2, DISCORD.3)])
        .collect()
}

fn default_bulkheads() -> BTreeMap<String, PoolConfig> {
    [
        ("model", PoolConfig::MODEL),
        ("api", PoolConfig::API),
        ("default", PoolConfig::DEFAULT),
    ]
    .into_iter()
    .map(|(name, pool)| (name.to_owned(), pool))
    .collect()
}

impl Default for SessionLimits {
    /// The seed's sliding window.
    fn default() -> Self {
        SessionLimits {
            requests: SESSION_WINDOW.0,
            window_seconds: SESSION_WINDOW.1,
        }
    }
}

impl Default for RetryConfig {
    /// The seed's 3 attempts backing off 1 s to 10 s.
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            initial_backoff_ms: 1_000,
            max_backoff_ms: 10_000,
            max_retry_after_ms: 30_000,
            attempt_timeout_ms: 60_000,
            min_time_left_ms: 50,
        }
    }
}

impl Default for TokenConfig {
    fn default() -> Self {
        TokenConfig {
            default_max_tokens: 1024,
            // The usual rule of thumb for English text with BPE tokenizers.
            chars_per_token: 4,
            max_call_tokens: sluice_usage::MAX_CALL_TOKENS,
            cut_stream_share: 1.0,
        }
    }
}

impl Default for AdaptiveSettings {
    /// The limiter's own: cut on evidence (halve, recover ×1.25 a second),
    /// the seed's AIMD (halve, grow 10% every 30 s) for limits that are
    /// not known, pause at most a minute, a 20 ms jitter margin.
    fn default() -> Self {
        let limiter = AdaptiveConfig::default();
        AdaptiveSettings {
            policy: super::AdaptivePolicy::Evidence,
            // Network jitter to a provider is a few to tens of
            // milliseconds; collisions widen it (up to 250 ms).
            jitter_margin_ms: 20,
            max_jitter_margin_ms: u64::try_from(limiter.max_jitter_margin.as_millis())
                .unwrap_or(u64::MAX),
            strikes: limiter.strikes,
            reduce_factor: limiter.reduce_factor,
            recovery_factor: limiter.recovery_factor,
            recovery_interval_seconds: limiter.recovery_interval.as_secs(),
            max_pause_seconds: limiter.max_pause.as_secs(),
        }
    }
}

impl Default for LimitsApiConfig {
    fn default() -> Self {
        LimitsApiConfig {
            lease_ttl_ms: 60_000,
            max_wait_ms: 30_000,
            max_held_per_tenant: 100,
            max_settle_multiple: 2,
        }
    }
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            enabled: true,
            dir: None,
            buffer: 10_000,
            rotate: Rotation::Day,
            max_file_bytes: 64 << 20,
            max_total_bytes: 1 << 30,
            max_files: 1000,
            max_age_hours: 7 * 24,
            max_open_files: 64,
        }
    }
}

// Written out, not derived, so that every default is in this one file.
#[allow(clippy::derivable_impls)]
impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            tenant_labels: false,
            token: None,
            refresh_interval_ms: 5_000,
        }
    }
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            enabled: true,
            token: None,
            token_env: None,
            history_seconds: 300,
            max_streams: 16,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            write_timeout_ms: 30_000,
            max_connections: 1_024,
            threads: 0,
        }
    }
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_timeout_ms: 25_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sluice_limit::{Algorithm, ToolClassifier};

    use super::*;

    /// (requests/s, burst) of the limit the default rules give `resource`.
    fn limit(resource: &str) -> Option<(f64, u64)> {
        crate::limits::rules::rules(&Config::default())
            .resolve(resource)
            .map(|l| (l.per_second_rate(), l.effective_burst()))
    }

    #[test]
    fn seed_model_limits_by_longest_prefix() {
        assert_eq!(limit("google/gemini-2.5-flash"), Some((5.0, 15)));
        assert_eq!(limit("anthropic/claude-sonnet-4"), Some((2.0, 8)));
        assert_eq!(limit("openai/gpt-4o-mini"), Some((3.0, 10)));
        assert_eq!(limit("mistral/large"), Some((2.0, 8)));
    }

    #[test]
    fn seed_api_and_session_limits() {
        assert_eq!(limit("api:github"), Some((5.0, 15)));
        assert_eq!(limit("api:slack"), Some((3.0, 10)));
        assert_eq!(limit("api:gmail"), Some((2.0, 5)));
        assert_eq!(limit("api:discord"), Some((50.0, 50)));
        let rules = crate::limits::rules::rules(&Config::default());
        let s = rules.resolve("session:abc").unwrap();
        assert_eq!(s.kind(), Algorithm::SlidingWindow);
        assert_eq!((s.capacity(), s.window()), (10, Duration::from_secs(60)));
        assert!(rules.validate().is_ok());
    }

    #[test]
    fn seed_tool_classification() {
        let tools = Config::default()
            .apis
            .iter()
            .flat_map(|a| a.tool_prefixes.iter().map(move |p| (p, &a.name)))
            .fold(ToolClassifier::new(), |t, (p, a)| {
                t.with(p.clone(), a.clone())
            });
        for (tool, api) in [
            ("GMAIL_SEND", "gmail"),
            ("GOOGLEMAIL_LIST", "gmail"),
            ("GOOGLECALENDAR_CREATE_EVENT", "google_calendar"),
            ("GOOGLESHEETS_APPEND", "google_sheets"),
            ("GOOGLEDRIVE_UPLOAD", "google_drive"),
            ("GITHUB_CREATE_ISSUE", "github"),
            ("LINEAR_CREATE_ISSUE", "linear"),
            ("slack_post_message", "slack"),
            ("CLICKUP_TASK", "clickup"),
            ("DISCORD_CREATE_ROLE", "discord"),
        ] {
            assert_eq!(tools.classify(tool), Some(api), "{tool}");
        }
        assert_eq!(tools.classify("WEB_SEARCH"), None);
    }
}
