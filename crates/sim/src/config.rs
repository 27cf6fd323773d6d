//! What the sim serves and how each upstream behaves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Error;

mod knobs;
mod seed;

pub use knobs::{Faults, Latency, Limits, MalformedBody};

/// The sim's configuration. `Default` reproduces the seed's tables: the
/// providers `openai`, `anthropic`, `google`, `deepseek`, `minimax` and the
/// APIs `slack`, `github`, `gmail`, … with the same limits Sluice assumes.
/// A map given in a file (`providers`, `models`, `apis`) replaces the
/// default map whole.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// The key clients must send: `Authorization: Bearer KEY` on
    /// OpenAI-format endpoints, `x-api-key: KEY` on Anthropic's,
    /// `x-goog-api-key: KEY` (or `?key=KEY`) on Gemini's, `api-key: KEY`
    /// on Azure's. None: any key that is not empty, sent that way; a call
    /// without one is refused with 401 as the providers refuse it.
    pub api_key: Option<String>,
    /// Seed for the fault probabilities; none draws one at start.
    pub seed: Option<u64>,
    /// Length of each embedding vector unless a request asks otherwise.
    pub embedding_dimensions: u32,
    /// Requests kept in the log read by `GET /_sim/log`.
    pub log_capacity: usize,
    /// What every model does unless its provider or itself says otherwise.
    pub defaults: ModelDefaults,
    /// Providers by name: the `openai` in `/openai/v1/…` and in
    /// `openai/gpt-4o`.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Per-model overrides, by the model name clients send.
    pub models: BTreeMap<String, ModelConfig>,
    /// SaaS APIs served under `/{api}/…`.
    pub apis: BTreeMap<String, ApiConfig>,
}

/// What every model does by default.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelDefaults {
    /// Tokens in a completion the client did not cut short.
    pub output_tokens: u32,
    /// `max_tokens` of a request that gives none.
    pub max_tokens: u32,
    /// Latency of every model.
    pub latency: Latency,
    /// Faults of every model.
    pub faults: Faults,
}

impl Default for ModelDefaults {
    fn default() -> Self {
        ModelDefaults {
            output_tokens: 24,
            max_tokens: 4_096,
            latency: Latency::default(),
            faults: Faults::default(),
        }
    }
}

/// A model provider. Its limits apply to each of its models separately,
/// as providers count per model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// Each model's quota.
    pub limits: Limits,
    /// Models listed by `GET /v1/models` and known to be this provider's.
    pub models: Vec<String>,
    /// Overrides `defaults.output_tokens`.
    pub output_tokens: Option<u32>,
    /// Overrides `defaults.latency`.
    pub latency: Option<Latency>,
    /// Overrides `defaults.faults`.
    pub faults: Option<Faults>,
}

/// One model's overrides.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Its provider, when neither the path, the provider's `models` nor a
    /// `provider/` prefix says so.
    pub provider: Option<String>,
    /// Replaces the provider's limits.
    pub limits: Option<Limits>,
    /// Overrides the provider's or the default output length.
    pub output_tokens: Option<u32>,
    /// Overrides the provider's or the default latency.
    pub latency: Option<Latency>,
    /// Overrides the provider's or the default faults.
    pub faults: Option<Faults>,
}

/// A simulated SaaS API.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Its quota (`tokens_per_minute` is not used).
    pub limits: Limits,
    /// Delay before each answer.
    pub latency_ms: u64,
    /// Network jitter on the way in (see [`Latency::jitter_ms`]).
    pub jitter_ms: u64,
    /// Faults it injects.
    pub faults: Faults,
    /// A `Cache-Control` header on its successful answers, as a real API
    /// sends one (GitHub: `private, max-age=60, s-maxage=60`); none when
    /// unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
}

/// What one model does, all layers applied.
#[derive(Debug, Clone)]
pub(crate) struct ModelSettings {
    pub provider: Option<String>,
    pub limits: Limits,
    pub output_tokens: u32,
    pub latency: Latency,
    pub faults: Faults,
}

/// Largest embedding a request may ask for.
pub(crate) const MAX_DIMENSIONS: u32 = 8_192;

impl SimConfig {
    /// The seed's providers and APIs with no limits at all: for benchmarks
    /// that measure the gateway.
    pub fn unlimited() -> Self {
        let mut config = Self::default();
        for provider in config.providers.values_mut() {
            provider.limits = Limits::unlimited();
        }
        for api in config.apis.values_mut() {
            api.limits = Limits::unlimited();
        }
        config
    }

    /// Checks every value; [`crate::Sim::start`] calls it too.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad key.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_DIMENSIONS).contains(&self.embedding_dimensions) {
            return Err(Error::invalid(
                "embedding_dimensions",
                format!("must be between 1 and {MAX_DIMENSIONS}"),
            ));
        }
        if self.log_capacity == 0 {
            return Err(Error::invalid("log_capacity", "must be at least 1"));
        }
        self.defaults.faults.check("defaults.faults")?;
        check_output("defaults.output_tokens", Some(self.defaults.output_tokens))?;
        for (name, p) in &self.providers {
            let key = format!("providers.{name}");
            check_name(&key, name)?;
            if self.apis.contains_key(name) {
                return Err(Error::invalid(key, "is also an API: paths would clash"));
            }
            p.limits.check(&format!("{key}.limits"))?;
            check_output(&format!("{key}.output_tokens"), p.output_tokens)?;
            if let Some(f) = &p.faults {
                f.check(&format!("{key}.faults"))?;
            }
        }
        for (name, m) in &self.models {
            let key = format!("models.{name}");
            if let Some(p) = &m.provider
                && !self.providers.contains_key(p)
            {
                return Err(Error::invalid(
                    format!("{key}.provider"),
                    format!("no provider named {p:?}"),
                ));
            }
            check_output(&format!("{key}.output_tokens"), m.output_tokens)?;
            if let Some(l) = &m.limits {
                l.check(&format!("{key}.limits"))?;
            }
            if let Some(f) = &m.faults {
                f.check(&format!("{key}.faults"))?;
            }
        }
        for (name, a) in &self.apis {
            let key = format!("apis.{name}");
            check_name(&key, name)?;
            a.limits.check(&format!("{key}.limits"))?;
            a.faults.check(&format!("{key}.faults"))?;
        }
        Ok(())
    }

    /// The provider of `model`: from the path, the model's own entry, a
    /// provider's list, a `provider/` prefix, or else the wire format's.
    pub(crate) fn provider_of(&self, model: &str, from_path: Option<&str>, wire: &str) -> String {
        if let Some(p) = from_path {
            return p.to_owned();
        }
        if let Some(p) = self.models.get(model).and_then(|m| m.provider.as_ref()) {
            return p.clone();
        }
        if let Some((p, _)) = self
            .providers
            .iter()
            .find(|(_, c)| c.models.iter().any(|m| m == model))
        {
            return p.clone();
        }
        match model.split_once('/') {
            Some((p, _)) if self.providers.contains_key(p) => p.to_owned(),
            _ => wire.to_owned(),
        }
    }

    /// The jitter before `model`'s quota check, served as `provider`'s.
    pub(crate) fn model_jitter_ms(&self, model: &str, provider: &str) -> u64 {
        let m = self.models.get(model).and_then(|m| m.latency);
        let p = self.providers.get(provider).and_then(|p| p.latency);
        pick(m, p, self.defaults.latency).jitter_ms
    }

    /// Everything `model` does, served as `provider`'s.
    pub(crate) fn model_settings(&self, model: &str, provider: &str) -> ModelSettings {
        let p = self.providers.get(provider);
        let m = self.models.get(model);
        ModelSettings {
            provider: p.map(|_| provider.to_owned()),
            limits: pick(
                m.and_then(|m| m.limits),
                p.map(|p| p.limits),
                Limits::unlimited(),
            ),
            output_tokens: pick(
                m.and_then(|m| m.output_tokens),
                p.and_then(|p| p.output_tokens),
                self.defaults.output_tokens,
            ),
            latency: pick(
                m.and_then(|m| m.latency),
                p.and_then(|p| p.latency),
                self.defaults.latency,
            ),
            faults: pick(
                m.and_then(|m| m.faults.clone()),
                p.and_then(|p| p.faults.clone()),
                self.defaults.faults.clone(),
            ),
        }
    }
}

/// Longest completion the sim writes (it holds it in memory).
const MAX_OUTPUT_TOKENS: u32 = 100_000;

fn check_output(key: &str, tokens: Option<u32>) -> Result<(), Error> {
    match tokens {
        Some(t) if t > MAX_OUTPUT_TOKENS => Err(Error::invalid(
            key,
            format!("must be at most {MAX_OUTPUT_TOKENS}"),
        )),
        _ => Ok(()),
    }
}

/// The model's setting, else the provider's, else the default.
fn pick<T>(model: Option<T>, provider: Option<T>, default: T) -> T {
    model.or(provider).unwrap_or(default)
}

/// Provider and API names are path segments.
fn check_name(key: &str, name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name != "v1"
        && !name.starts_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            key,
            "must be letters, digits, `_`, `-` or `.`, not start with `_`, and not be `v1`",
        ))
    }
}
