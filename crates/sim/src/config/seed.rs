//! The default configuration: the seed's providers and APIs, with the
//! limits Sluice's own seed tables assume, so that the demo shows a
//! gateway that never exceeds them.

use std::collections::BTreeMap;

use super::{ApiConfig, Limits, ModelDefaults, ProviderConfig, SimConfig};

/// (provider, requests/s, burst, models listed by `GET /v1/models`).
const PROVIDERS: &[(&str, f64, u32, &[&str])] = &[
    (
        "openai",
        3.0,
        10,
        &["gpt-4o-mini", "gpt-4o", "text-embedding-3-small"],
    ),
    (
        "anthropic",
        2.0,
        8,
        &["claude-3-5-haiku-latest", "claude-sonnet-4-5"],
    ),
    ("google", 5.0, 15, &["gemini-2.0-flash"]),
    ("deepseek", 3.0, 10, &["deepseek-chat"]),
    ("minimax", 3.0, 10, &["MiniMax-M1"]),
];

/// (api, requests/s, burst).
const APIS: &[(&str, f64, u32)] = &[
    ("google_calendar", 2.0, 5),
    ("google_sheets", 2.0, 5),
    ("google_drive", 2.0, 5),
    ("gmail", 2.0, 5),
    ("github", 5.0, 15),
    ("linear", 3.0, 10),
    ("slack", 3.0, 10),
    ("clickup", 2.0, 5),
    ("discord", 2.0, 5),
];

impl Default for SimConfig {
    fn default() -> Self {
        let providers = PROVIDERS
            .iter()
            .map(|(name, rate, burst, models)| {
                let config = ProviderConfig {
                    limits: Limits::per_second(*rate).burst(*burst),
                    models: models.iter().map(|m| (*m).to_owned()).collect(),
                    ..ProviderConfig::default()
                };
                ((*name).to_owned(), config)
            })
            .collect();
        let apis = APIS
            .iter()
            .map(|(name, rate, burst)| {
                let config = ApiConfig {
                    limits: Limits::per_second(*rate).burst(*burst),
                    ..ApiConfig::default()
                };
                ((*name).to_owned(), config)
            })
            .collect();
        SimConfig {
            api_key: None,
            seed: None,
            embedding_dimensions: 64,
            log_capacity: 10_000,
            defaults: ModelDefaults::default(),
            providers,
            models: BTreeMap::new(),
            apis,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        SimConfig::default().validate().unwrap();
        SimConfig::unlimited().validate().unwrap();
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let err = serde_json::from_str::<SimConfig>(r#"{"apis":{"slack":{"limit":{}}}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("limit"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let config: SimConfig = serde_json::from_str(
            r#"{"models":{"m":{"limits":{"requests_per_second":1,"burst":0}}}}"#,
        )
        .unwrap();
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("models.m.limits.burst"), "{err}");
    }

    #[test]
    fn provider_resolution_order() {
        let config = SimConfig::default();
        assert_eq!(config.provider_of("gpt-4o", None, "anthropic"), "openai");
        assert_eq!(config.provider_of("google/x", None, "openai"), "google");
        assert_eq!(
            config.provider_of("x", Some("deepseek"), "openai"),
            "deepseek"
        );
        assert_eq!(
            config.provider_of("nobody/x", None, "anthropic"),
            "anthropic"
        );
        let s = config.model_settings("claude-x", "anthropic");
        assert_eq!(s.limits, Limits::per_second(2.0).burst(8));
        assert_eq!(
            config.model_settings("x", "nope").limits,
            Limits::unlimited()
        );
    }
}
