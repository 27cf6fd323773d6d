//! The gateway's response cache (docs/cache.md): built from `[cache]`,
//! in this process or in Redis; its headers; the per-tenant counters and
//! the admin filter; identical misses in flight together ([`flight`]).
//! The request path's part is the cache layer
//! (`layers/cache.rs`).

pub(crate) mod control;
pub(crate) mod flight;
mod tenants;

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use sluice_usage::cache::{AnswerCache, Invalidate, RedisCache, RedisCacheConfig, ResponseCache};

use crate::config::Config;
use crate::error::ApiError;

pub(crate) use flight::Flights;
pub(crate) use tenants::TenantCounters;

/// The header a client sets to steer the cache and that every answer
/// carries back.
pub const CACHE_HEADER: HeaderName = HeaderName::from_static("x-sluice-cache");
/// The header asking for a TTL (whole seconds) for the answer stored.
pub const TTL_HEADER: HeaderName = HeaderName::from_static("x-sluice-cache-ttl");
/// The header naming the client's session, for the per-session cache.
pub const SESSION_HEADER: HeaderName = HeaderName::from_static("x-sluice-session");

/// The cache as the gateway holds it: in this process or in Redis.
pub(crate) type SharedCache = Arc<dyn AnswerCache>;

/// Builds the cache `[cache]` asks for.
///
/// # Errors
/// The Redis URL when `cache.redis` is on and it cannot be parsed.
pub(crate) fn build(config: &Config) -> Result<SharedCache, String> {
    let store = config.cache.store_config();
    match (&config.redis, config.cache.redis) {
        (Some(r), true) => {
            let mut redis = RedisCacheConfig::new(r.url.clone());
            redis.prefix = r.prefix.clone();
            redis.timeout = Duration::from_millis(r.timeout_ms);
            RedisCache::new(store, redis)
                .map(|c| Arc::new(c) as SharedCache)
                .map_err(|e| e.to_string())
        }
        _ => Ok(Arc::new(ResponseCache::new(store))),
    }
}

/// `DELETE /v1/cache`'s filter from its query: `tenant`, `model` or
/// `api` (a proxied API's entries), `key_prefix` (hex), each optional.
///
/// # Errors
/// 400 naming an unknown parameter or a prefix that is not hex.
pub(crate) fn filter(
    config: &Config,
    query: &std::collections::HashMap<String, String>,
) -> Result<Invalidate, ApiError> {
    let mut filter = Invalidate::default();
    for (name, value) in query {
        match name.as_str() {
            "tenant" => filter.scope = Some(config.cache.scope(value)),
            "model" | "api" => {
                if filter.model.is_some() {
                    return Err(ApiError::BadRequest {
                        message: "give model or api, not both".into(),
                        param: Some(name.clone()),
                    });
                }
                filter.model = Some(if name == "api" {
                    format!("api:{value}")
                } else {
                    value.clone()
                });
            }
            "key_prefix" => {
                if value.is_empty()
                    || value.len() > 64
                    || !value.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(ApiError::BadRequest {
                        message: "key_prefix must be 1 to 64 hex digits".into(),
                        param: Some("key_prefix".into()),
                    });
                }
                filter.key_prefix = Some(value.to_ascii_lowercase());
            }
            other => {
                return Err(ApiError::BadRequest {
                    message: format!(
                        "unknown query parameter {other:?}: expected tenant, model, api or key_prefix"
                    ),
                    param: Some(other.to_owned()),
                });
            }
        }
    }
    Ok(filter)
}
