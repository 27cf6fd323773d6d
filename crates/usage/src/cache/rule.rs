//! Which requests may be answered from the cache.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Endpoint;

/// When a model's answers are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Never: every request goes upstream.
    Off,
    /// Only answers that are deterministic enough to repeat: requests with
    /// `temperature` 0 or a `seed`, and embeddings always (the default).
    #[default]
    Deterministic,
    /// Every request, whatever its sampling parameters: for models whose
    /// owner prefers a repeated answer to a new one.
    Always,
}

/// Why a request is not looked up in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bypass {
    /// The model's policy is [`Policy::Off`].
    Off,
    /// It samples (`temperature` other than 0 and no `seed`): another call
    /// would give another answer.
    Sampling,
}

impl Bypass {
    /// A short reason for headers, logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Bypass::Off => "off",
            Bypass::Sampling => "sampling",
        }
    }
}

impl Policy {
    /// Whether a request to `endpoint` with this `body` may be answered from
    /// the cache and its answer stored, or why not.
    ///
    /// # Errors
    ///
    /// The [`Bypass`] reason when it may not.
    pub fn check(self, endpoint: Endpoint, body: &Value) -> Result<(), Bypass> {
        match self {
            Policy::Off => Err(Bypass::Off),
            Policy::Always => Ok(()),
            Policy::Deterministic if is_deterministic(endpoint, body) => Ok(()),
            Policy::Deterministic => Err(Bypass::Sampling),
        }
    }
}

/// Whether the same request gives the same answer: embeddings always; a
/// generation when its `temperature` is 0 or it sets a `seed`. A missing
/// temperature is the provider's default (1 for OpenAI and Anthropic), so
/// it samples.
pub fn is_deterministic(endpoint: Endpoint, body: &Value) -> bool {
    if endpoint == Endpoint::Embeddings {
        return true;
    }
    let zero_temperature = body.get("temperature").and_then(Value::as_f64) == Some(0.0);
    let seeded = body.get("seed").is_some_and(|seed| !seed.is_null());
    zero_temperature || seeded
}
