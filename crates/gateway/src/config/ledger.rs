//! `[ledger]`: the usage ledger (a record of every call, what it used and
//! what it cost), and `[prices]`: what models cost, over the shipped table.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_usage::{Catalog, MAX_CATALOG_BYTES, Price, PriceError, PriceTable};

use super::jobs::{JobsConfig, StoreLocation};
use super::keys::WITH_JOBS;

/// The usage ledger. On by default: spend per tenant, key, model and
/// feature is the first thing operators ask of a gateway, and the writer
/// costs a request one queue push.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// Whether calls are recorded (default true).
    pub enabled: bool,
    /// `"jobs"` (the file `{data_dir}/ledger.db` beside SQLite jobs, or
    /// the job store's PostgreSQL), `"sqlite"` (`{data_dir}/ledger.db`)
    /// or a `postgres://` URL.
    pub store: String,
    /// Records waiting for the writer (seed: 1,000); past it they go to
    /// the spill file `{data_dir}/ledger-spill.jsonl`.
    pub queue: usize,
    /// Records per transaction.
    pub batch: usize,
    /// Records older than this many days are deleted (0: kept for ever).
    pub retention_days: u64,
    /// Rollups (per minute, hour and day) older than this many days are
    /// deleted (0: kept for ever); minute rollups are kept at most as
    /// long as the records.
    pub rollup_retention_days: u64,
    /// How many tenants and models the Prometheus token and cost
    /// counters name; the rest are counted under `other`.
    pub metric_labels: usize,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            enabled: true,
            store: WITH_JOBS.to_owned(),
            queue: sluice_spool::DEFAULT_QUEUE,
            batch: sluice_spool::DEFAULT_BATCH,
            retention_days: 30,
            rollup_retention_days: 400,
            metric_labels: 100,
        }
    }
}

impl LedgerConfig {
    /// Where the ledger lives, `data_dir` holding the SQLite file.
    pub fn location(&self, data_dir: &Path, jobs: &JobsConfig) -> StoreLocation {
        StoreLocation::beside_jobs(&self.store, data_dir, jobs, "ledger.db")
    }
}

/// `[request_log]`: what the request log (`GET /v1/requests`, read from
/// the ledger's records) keeps besides each call's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestLogConfig {
    /// Which calls' request and response bodies are kept, redacted
    /// (`docs/operations.md`): `off` (the default), `errors` (calls
    /// answered 400 and above, or never answered) or `all`.
    pub bodies: BodiesKept,
    /// The most of each body kept, in bytes (default 16 KiB); a longer
    /// one is cut and marked `…[truncated]`.
    pub max_body_bytes: usize,
    /// Bodies older than this many days are deleted, their records kept
    /// (0: as long as the records, `[ledger] retention_days`).
    pub retention_days: u64,
}

/// The most `[request_log] max_body_bytes` may be: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1 << 20;

impl Default for RequestLogConfig {
    fn default() -> Self {
        RequestLogConfig {
            bodies: BodiesKept::Off,
            max_body_bytes: 16 * 1024,
            retention_days: 7,
        }
    }
}

/// `[request_log] bodies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BodiesKept {
    /// None.
    Off,
    /// Of calls that failed: answered 400 and above, or never answered.
    Errors,
    /// Of every call.
    All,
}

/// `[prices."{model prefix}"]`: a model's prices in dollars per million
/// tokens, over (or beside) the shipped ones; the longest prefix of a
/// model wins. Decimal strings (`"0.15"`) are exact; TOML numbers are
/// read as the decimal they print as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Per million input (prompt) tokens.
    pub input: Dollars,
    /// Per million output (completion) tokens.
    pub output: Dollars,
    /// Per million input tokens read from the provider's prompt cache
    /// (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<Dollars>,
}

/// Dollars as a decimal string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Dollars(pub String);

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dollars, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(u64),
            Float(f64),
        }
        Ok(Dollars(match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Int(n) => n.to_string(),
            // `Display` of an f64 is the shortest decimal that reads back
            // as it, never in exponent form: 0.15 stays "0.15".
            Raw::Float(f) => f.to_string(),
        }))
    }
}

/// `[pricing]`: where prices and context windows come from under the
/// hand-checked table (`crates/usage/prices.json`) and `[prices]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PricingConfig {
    /// `"shipped"` (the LiteLLM-format price map in the binary, the
    /// default), `"none"` (only the hand-checked table and `[prices]`), or
    /// the path of a price map in LiteLLM's
    /// `model_prices_and_context_window.json` format (`sluice prices
    /// refresh` writes one).
    pub catalog: String,
}

/// The `[pricing] catalog` value that names the shipped map.
pub const SHIPPED_CATALOG: &str = "shipped";
/// The `[pricing] catalog` value that names no map.
pub const NO_CATALOG: &str = "none";

impl Default for PricingConfig {
    fn default() -> Self {
        PricingConfig {
            catalog: SHIPPED_CATALOG.to_owned(),
        }
    }
}

/// The price map `[pricing] catalog` names.
///
/// # Errors
/// [`PriceError`] naming `pricing.catalog`: a file that cannot be read or
/// is not a price map.
pub fn catalog(pricing: &PricingConfig) -> Result<Catalog, PriceError> {
    match pricing.catalog.as_str() {
        SHIPPED_CATALOG => Ok(Catalog::shipped()),
        NO_CATALOG => Ok(Catalog::default()),
        path => {
            let fail = |reason: String| PriceError {
                field: "pricing.catalog".into(),
                reason,
            };
            let file = std::fs::File::open(path).map_err(|e| fail(format!("{path}: {e}")))?;
            let mut text = String::new();
            // At most one byte past the bound, so a huge file is refused
            // without being read whole.
            std::io::Read::read_to_string(
                &mut std::io::Read::take(file, MAX_CATALOG_BYTES as u64 + 1),
                &mut text,
            )
            .map_err(|e| fail(format!("{path}: {e}")))?;
            Catalog::from_litellm_json(&text).map_err(|e| fail(format!("{path}: {}", e.reason)))
        }
    }
}

/// The price map `pricing` names, the shipped hand-checked prices over
/// it, and `overrides` over both.
///
/// # Errors
/// [`PriceError`] whose field is `pricing.catalog` or
/// `prices."{prefix}".{input|output|cached_input}`.
pub fn price_table(
    pricing: &PricingConfig,
    overrides: &BTreeMap<String, PriceConfig>,
) -> Result<PriceTable, PriceError> {
    let mut table = PriceTable::defaults().over(catalog(pricing)?.prices);
    for (prefix, p) in overrides {
        if prefix.is_empty() {
            return Err(PriceError {
                field: "prices".into(),
                reason: "a model prefix must not be empty".into(),
            });
        }
        let price = Price::per_million(
            &p.input.0,
            &p.output.0,
            p.cached_input.as_ref().map(|c| c.0.as_str()),
        )
        .map_err(|e| PriceError {
            field: format!("prices.{prefix:?}.{}", e.field),
            reason: e.reason,
        })?;
        table = table.with(prefix.clone(), price);
    }
    Ok(table)
}
