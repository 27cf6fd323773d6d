//! `GET /v1/models` and `GET /v1/models/{model}`: the models the gateway
//! routes, in OpenAI's list shape, behind the same tenant auth as the
//! model routes. Gemini clients' `GET /v1beta/models` lists the same.
//!
//! The list ([`catalog`], the one place that says which models there
//! are) holds real model names: those the configuration names (per-model
//! limits, fallbacks) and the known models of each configured provider
//! (the price table's, whose names start with the provider's prefix). A
//! provider with no known model (a custom OpenAI-compatible server) is
//! listed as `{name}/*`, which is not a model but says how to name one.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_usage::{Endpoint, PriceTable};

use crate::config::{Config, ProviderConfig};
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::providers;
use crate::state::AppState;

/// `GET /v1/models`.
pub async fn list(State(s): State<AppState>, _: Tenant) -> Response {
    Json(catalog(&s.config, &s.spend.prices)).into_response()
}

/// `GET /v1/models/{model}` (the model may hold a `/`): its entry, that
/// of a model the gateway routes but does not know by name, or a 404.
pub async fn retrieve(
    State(s): State<AppState>,
    _: Tenant,
    Path(model): Path<String>,
) -> Result<Json<Value>, ApiError> {
    crate::names::check("model", &model)?;
    let list = catalog(&s.config, &s.spend.prices);
    if let Some(m) = list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["id"] == model.as_str())
    {
        return Ok(Json(m.clone()));
    }
    let p = s
        .config
        .provider_for(&model)
        .ok_or_else(|| ApiError::NotFound(format!("the model {model:?} does not exist")))?;
    Ok(Json(entry(&model, p)))
}

/// The gateway routes that answer a provider's models.
fn routes(p: &ProviderConfig) -> Vec<&'static str> {
    [
        (Endpoint::Chat, "/v1/chat/completions"),
        (Endpoint::Embeddings, "/v1/embeddings"),
        (Endpoint::Responses, "/v1/responses"),
        (Endpoint::Messages, "/v1/messages"),
        (Endpoint::Generate, "/v1beta/models/{model}:generateContent"),
    ]
    .into_iter()
    .filter(|(e, _)| providers::for_call(p.format, *e).is_some())
    .map(|(_, r)| r)
    .collect()
}

fn entry(id: &str, p: &ProviderConfig) -> Value {
    json!({
        "id": id,
        "object": "model",
        "created": 0,
        "owned_by": p.name,
        "format": p.format,
        "routes": routes(p),
    })
}

/// The list: the configuration's named models and each provider's known
/// ones, each once, sorted. Only names a client can call: a provider with
/// no known model is not listed (a `{name}/*` entry would be taken for a
/// model by every SDK); its calls still route by prefix, and `/readyz`
/// lists every provider.
pub(crate) fn catalog(config: &Config, prices: &PriceTable) -> Value {
    let mut ids: BTreeMap<String, &ProviderConfig> = BTreeMap::new();
    let named = config
        .models
        .iter()
        .map(|m| m.prefix.as_str())
        .filter(|m| !m.is_empty() && !m.ends_with('/'))
        .chain(config.fallbacks.iter().flat_map(|(model, chain)| {
            std::iter::once(model.as_str()).chain(chain.iter().map(String::as_str))
        }))
        .chain(prices.iter().map(|(model, _)| model));
    for model in named {
        // Only full names: a price for `openai/gpt-4o` is a model, one
        // for `openai/` would not be.
        if model.ends_with('/') || model.contains('*') {
            continue;
        }
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
    let data: Vec<Value> = ids.into_iter().map(|(id, p)| entry(&id, p)).collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelLimits, WireFormat};

    fn price() -> sluice_usage::Price {
        sluice_usage::Price::per_million("1", "2", None).unwrap()
    }

    #[test]
    fn real_models_once_and_never_a_wildcard() {
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
        let prices = PriceTable::default()
            .with("openai/gpt-4o-mini", price())
            .with("openai/gpt-4o", price())
            .with("google/gemini-2.5-flash", price())
            .with("mistral-unconfigured/large", price());
        let list = catalog(&c, &prices);
        assert_eq!(list["object"], "list");
        let data = list["data"].as_array().unwrap();
        let ids: Vec<&str> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
        for id in [
            "openai/gpt-4o",
            "openai/gpt-4o-mini",
            "anthropic/claude-sonnet-4-5",
            "google/gemini-2.5-flash",
        ] {
            assert_eq!(
                ids.iter().filter(|i| **i == id).count(),
                1,
                "{id} in {ids:?}"
            );
        }
        // Providers with known models are not wildcards; models of no
        // configured provider are not listed.
        for id in [
            "openai/*",
            "anthropic/*",
            "google/*",
            "nobody/x",
            "mistral-unconfigured/large",
        ] {
            assert!(!ids.contains(&id), "{id} in {ids:?}");
        }
        let gemini = data
            .iter()
            .find(|m| m["id"] == "google/gemini-2.5-flash")
            .unwrap();
        assert_eq!(gemini["owned_by"], "google");
        assert_eq!(gemini["format"], "gemini");
        // Messages clients reach it by translation, Gemini clients natively.
        assert_eq!(
            gemini["routes"],
            json!([
                "/v1/chat/completions",
                "/v1/responses",
                "/v1/messages",
                "/v1beta/models/{model}:generateContent"
            ])
        );
        // A provider the table knows nothing of is not listed at all,
        // never as a wildcard a client would take for a model.
        let bare = catalog(&c, &PriceTable::default());
        let ids: Vec<&str> = bare["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert!(ids.contains(&"openai/gpt-4o"), "{ids:?}");
        assert!(!ids.iter().any(|i| i.ends_with("/*")), "{ids:?}");
    }
}
