//! `GET /v1/models`: the models the gateway routes, in OpenAI's list shape,
//! behind the same tenant auth as the model routes.
//!
//! The gateway routes by prefix and does not know every model a provider
//! serves: each provider is listed as `{name}/*` (and each extra prefix as
//! `{prefix}*`), and models the configuration names (per-model limits,
//! fallbacks) are listed by name.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_usage::Endpoint;

use crate::config::{Config, ProviderConfig};
use crate::layers::auth::Tenant;
use crate::providers;
use crate::state::AppState;

/// `GET /v1/models`.
pub async fn list(State(s): State<AppState>, _: Tenant) -> Response {
    Json(catalog(&s.config)).into_response()
}

/// The gateway routes that answer a provider's models.
fn routes(p: &ProviderConfig) -> Vec<&'static str> {
    let adapter = providers::for_format(p.format);
    [
        (Endpoint::Chat, "/v1/chat/completions"),
        (Endpoint::Embeddings, "/v1/embeddings"),
        (Endpoint::Responses, "/v1/responses"),
        (Endpoint::Messages, "/v1/messages"),
    ]
    .into_iter()
    .filter(|(e, _)| adapter.serves(*e))
    .map(|(_, r)| r)
    .collect()
}

/// The list: providers' wildcards, then named models, each once, sorted.
pub(crate) fn catalog(config: &Config) -> Value {
    let mut ids: BTreeMap<String, &ProviderConfig> = BTreeMap::new();
    for p in &config.providers {
        ids.insert(format!("{}/*", p.name), p);
        for prefix in &p.prefixes {
            ids.insert(format!("{prefix}*"), p);
        }
    }
    let named = config
        .models
        .iter()
        .map(|m| m.prefix.as_str())
        .filter(|m| !m.is_empty() && !m.ends_with('/'))
        .chain(config.fallbacks.iter().flat_map(|(model, chain)| {
            std::iter::once(model.as_str()).chain(chain.iter().map(String::as_str))
        }));
    for model in named {
        if let Some(p) = config.provider_for(model) {
            ids.insert(model.to_owned(), p);
        }
    }
    // A pool and an alias are models of their own, listed once each (a
    // pool as owned by its first deployment's provider).
    let pools = config.pools.iter().map(|p| p.model.as_str());
    let aliases = config.aliases.keys().map(String::as_str);
    for model in pools.chain(aliases) {
        let target = config.resolve_alias(model);
        let provider = match config.pool_index(target) {
            Some(i) => config.pools[i]
                .deployments
                .first()
                .and_then(|d| config.provider_named(&d.provider))
                .map(|i| &config.providers[i]),
            None => config.provider_for(target),
        };
        if let Some(p) = provider {
            ids.insert(model.to_owned(), p);
        }
    }
    let data: Vec<Value> = ids
        .into_iter()
        .map(|(id, p)| {
            json!({
                "id": id,
                "object": "model",
                "created": 0,
                "owned_by": p.name,
                "format": p.format,
                "routes": routes(p),
            })
        })
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelLimits, WireFormat};

    #[test]
    fn providers_as_wildcards_and_named_models_once() {
        let mut c = Config::default();
        c.models.push(ModelLimits {
            prefix: "openai/gpt-4o".into(),
            ..c.models[0].clone()
        });
        c.fallbacks.insert(
            "openai/gpt-4o".into(),
            vec!["anthropic/claude-sonnet-4-5".into(), "nobody/x".into()],
        );
        if let Some(g) = c.providers.iter_mut().find(|p| p.name == "google") {
            g.format = WireFormat::Gemini;
        }
        let list = catalog(&c);
        assert_eq!(list["object"], "list");
        let data = list["data"].as_array().unwrap();
        let ids: Vec<&str> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
        for id in [
            "openai/*",
            "anthropic/*",
            "google/*",
            "openai/gpt-4o",
            "anthropic/claude-sonnet-4-5",
        ] {
            assert_eq!(
                ids.iter().filter(|i| **i == id).count(),
                1,
                "{id} in {ids:?}"
            );
        }
        // A model no provider serves is not listed; prefixes are not models.
        assert!(
            !ids.contains(&"nobody/x") && !ids.contains(&"openai/"),
            "{ids:?}"
        );
        let google = data.iter().find(|m| m["id"] == "google/*").unwrap();
        assert_eq!(google["owned_by"], "google");
        assert_eq!(google["format"], "gemini");
        assert_eq!(google["routes"], json!(["/v1/chat/completions"]));
        let claude = data.iter().find(|m| m["id"] == "anthropic/*").unwrap();
        assert_eq!(
            claude["routes"],
            json!(["/v1/chat/completions", "/v1/messages"])
        );
    }
}
