//! `[[pools]]` and `[aliases]`: one model name served by several
//! deployments (keys, regions, providers), each paced to its own limit,
//! and other names for models.

use serde::{Deserialize, Serialize};

use super::Config;

/// The most deployments one pool may have: a pool is chosen from on every
/// call, by looking at each of them.
pub const MAX_DEPLOYMENTS: usize = 64;

/// The most pools a configuration may have.
pub const MAX_POOLS: usize = 256;

/// How a pool picks the deployment of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The deployment that can take the call soonest (its limiter's wait,
    /// its calls in flight, its circuit), by weight among equals.
    #[default]
    Fill,
    /// The first deployment until its limit, then the next (the
    /// overflow): "PTU first, pay-as-you-go after".
    Ordered,
}

impl Strategy {
    /// Its name in the configuration.
    pub const fn as_str(self) -> &'static str {
        match self {
            Strategy::Fill => "fill",
            Strategy::Ordered => "ordered",
        }
    }
}

/// `[[pools]]`: one model name over several deployments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPool {
    /// The name clients call (`openai/gpt-4o-mini`); it takes precedence
    /// over a provider's prefix.
    pub model: String,
    /// How a call's deployment is picked.
    #[serde(default)]
    pub strategy: Strategy,
    /// Failures in a row (5xx, timeouts, refused connections) that open a
    /// deployment's circuit (default 3).
    #[serde(default = "failures_to_open")]
    pub failures_to_open: u32,
    /// How long an open circuit keeps a deployment out before one probe is
    /// let through (default 1000 ms).
    #[serde(default = "open_ms")]
    pub open_ms: u64,
    /// The deployments, in order (the order `ordered` uses).
    pub deployments: Vec<Deployment>,
}

/// `[[pools.deployments]]`: one upstream that serves a pool's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployment {
    /// A `[[providers]]` entry: its base URL, key and wire format.
    pub provider: String,
    /// The model's name upstream; default: the pool's, its prefix (up to
    /// the first `/`) stripped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Requests per second (fractions allowed).
    pub requests_per_second: f64,
    /// Requests allowed in a burst.
    pub burst: u64,
    /// Tokens per minute (prompt + completion), if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    /// Calls in flight at once, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u64>,
    /// Its share among deployments that can take a call equally soon
    /// (default 1).
    #[serde(default = "weight")]
    pub weight: u32,
}

fn failures_to_open() -> u32 {
    3
}

fn open_ms() -> u64 {
    1_000
}

fn weight() -> u32 {
    1
}

impl Deployment {
    /// The model's name upstream, for a deployment of the pool `pool`.
    pub fn upstream_model<'a>(&'a self, pool: &'a str) -> &'a str {
        match &self.model {
            Some(m) => m,
            None => pool.split_once('/').map_or(pool, |(_, rest)| rest),
        }
    }

    /// Its limiter resource: `deployment:{provider}/{upstream model}`,
    /// the same name on every replica, so that Redis shares it.
    pub fn resource(&self, pool: &str) -> String {
        format!(
            "{DEPLOYMENT_PREFIX}{}/{}",
            self.provider,
            self.upstream_model(pool)
        )
    }
}

/// What every deployment's limiter resource starts with.
pub const DEPLOYMENT_PREFIX: &str = "deployment:";

impl Config {
    /// Where the pool serving `model` is in `pools`, if one does.
    pub fn pool_index(&self, model: &str) -> Option<usize> {
        self.pools.iter().position(|p| p.model == model)
    }

    /// The model `name` stands for: its alias's target, or itself.
    pub fn resolve_alias<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases.get(name).map_or(name, String::as_str)
    }

    /// The deployment whose limiter resource is `resource`.
    pub fn deployment_of(&self, resource: &str) -> Option<&Deployment> {
        resource.strip_prefix(DEPLOYMENT_PREFIX)?;
        self.pools.iter().find_map(|p| {
            p.deployments
                .iter()
                .find(|d| d.resource(&p.model) == resource)
        })
    }

    /// Where the provider named `name` is in `providers`.
    pub fn provider_named(&self, name: &str) -> Option<usize> {
        self.providers.iter().position(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(provider: &str, model: Option<&str>) -> Deployment {
        Deployment {
            provider: provider.into(),
            model: model.map(str::to_owned),
            requests_per_second: 25.0,
            burst: 5,
            tokens_per_minute: None,
            max_in_flight: None,
            weight: 1,
        }
    }

    #[test]
    fn the_upstream_model_defaults_to_the_pools_without_its_prefix() {
        let d = deployment("openai-a", None);
        assert_eq!(d.upstream_model("openai/gpt-4o-mini"), "gpt-4o-mini");
        assert_eq!(d.upstream_model("plain"), "plain");
        assert_eq!(
            d.resource("openai/gpt-4o-mini"),
            "deployment:openai-a/gpt-4o-mini"
        );
        let named = deployment("azure-eu", Some("gpt4o-eu"));
        assert_eq!(named.upstream_model("openai/gpt-4o-mini"), "gpt4o-eu");
        assert_eq!(
            named.resource("openai/gpt-4o-mini"),
            "deployment:azure-eu/gpt4o-eu"
        );
    }
}
