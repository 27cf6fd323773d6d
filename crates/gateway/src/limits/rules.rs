//! The limiter's rules and adaptive settings from the config, and the
//! shared limiter `[redis]` asks for, with its metrics and logs wired.

use std::time::Duration;

use sluice_limit::{AdaptiveConfig, Algorithm, Limit, Policy, Rules};
use sluice_redis::{Failure, Mode, RedisConfig, RedisLimiter};

use super::resources::{inflight_resource, tokens_resource};
use crate::config::{AdaptivePolicy, Config, RedisSettings};

/// `r` requests per second as capacity per window: whole numbers per
/// second, fractions as the smallest power-of-ten window that makes them
/// whole (2.5/s → 25 per 10 s).
pub(crate) fn rate_limit(r: f64, burst: u64) -> Limit {
    let mut window = 1u64;
    while (r * window as f64).fract().abs() > 1e-9 && window < 1_000 {
        window *= 10;
    }
    let capacity = ((r * window as f64).round() as u64).max(1);
    Limit::new(capacity, Duration::from_secs(window)).burst(burst.max(1))
}

/// The limiter's rules from the config.
pub(crate) fn rules(config: &Config) -> Rules {
    let mut rules = Rules::new();
    for m in &config.models {
        let rate = rate_limit(m.requests_per_second, m.burst).provisional(m.guess);
        rules = rules.prefix(m.prefix.clone(), rate);
        if let Some(tpm) = m.tokens_per_minute {
            rules = rules.prefix(tokens_resource(&m.prefix), Limit::per_minute(tpm.max(1)));
        }
        if let Some(n) = m.max_in_flight {
            rules = rules.prefix(inflight_resource(&m.prefix), Limit::in_flight(n.max(1)));
        }
    }
    // Each deployment of a pool is a resource of its own, exact: its
    // name holds the provider, so no model prefix reaches it.
    for p in &config.pools {
        for d in &p.deployments {
            let name = d.resource(&p.model);
            rules = rules.exact(name.clone(), rate_limit(d.requests_per_second, d.burst));
            if let Some(tpm) = d.tokens_per_minute {
                rules = rules.exact(tokens_resource(&name), Limit::per_minute(tpm.max(1)));
            }
            if let Some(n) = d.max_in_flight {
                rules = rules.exact(inflight_resource(&name), Limit::in_flight(n.max(1)));
            }
        }
    }
    for a in &config.apis {
        let name = sluice_limit::api_resource(&a.name);
        rules = rules.exact(name.clone(), rate_limit(a.requests_per_second, a.burst));
        if let Some(n) = a.max_in_flight {
            rules = rules.exact(inflight_resource(&name), Limit::in_flight(n.max(1)));
        }
    }
    rules.prefix(
        sluice_limit::SESSION_PREFIX,
        Limit::new(
            config.sessions.requests.max(1),
            Duration::from_secs(config.sessions.window_seconds.max(1)),
        )
        .algorithm(Algorithm::SlidingWindow),
    )
}

/// Counts and logs a capacity change, in-process or shared.
pub(crate) fn capacity_changed(c: &sluice_limit::CapacityChange) {
    crate::metrics::capacity_change(&c.resource, c.reason.as_str(), c.capacity as f64);
    tracing::info!(
        resource = %c.resource,
        from = c.previous,
        to = c.capacity,
        per_second = c.capacity as f64 / c.window.as_secs_f64().max(1e-9),
        reason = c.reason.as_str(),
        "capacity changed"
    );
}

pub(crate) fn adaptive(config: &Config) -> AdaptiveConfig {
    let a = &config.adaptive;
    AdaptiveConfig {
        reduce_factor: a.reduce_factor,
        recovery_factor: a.recovery_factor,
        recovery_interval: Duration::from_secs(a.recovery_interval_seconds),
        max_pause: Duration::from_secs(a.max_pause_seconds),
        policy: match a.policy {
            AdaptivePolicy::Evidence => Policy::Evidence,
            AdaptivePolicy::Seed => Policy::Seed,
        },
        jitter_margin: Duration::from_millis(a.jitter_margin_ms),
        max_jitter_margin: Duration::from_millis(a.max_jitter_margin_ms),
        strikes: a.strikes,
        ..AdaptiveConfig::default()
    }
}

/// The shared limiter for `[redis]`, with its metrics and logs wired.
pub(crate) async fn connect_redis(
    config: &Config,
    r: &RedisSettings,
) -> Result<RedisLimiter, sluice_redis::Error> {
    let mut cfg = RedisConfig::new(r.url.clone());
    cfg.prefix = r.prefix.clone();
    cfg.mode = if r.mode == "leased" {
        Mode::Leased
    } else {
        Mode::Exact
    };
    cfg.failure = if r.failure == "fail_closed" {
        Failure::FailClosed
    } else {
        Failure::FailOpen
    };
    cfg.timeout = Duration::from_millis(r.timeout_ms.max(1));
    cfg.lease_ttl = Duration::from_millis(r.lease_ttl_ms);
    cfg.block_ttl = Duration::from_millis(r.block_ttl_ms.max(1));
    if let Some(id) = &r.replica_id {
        cfg.replica_id = id.clone();
    }
    let limiter = RedisLimiter::connect(cfg, rules(config), adaptive(config)).await?;
    let failure = r.failure.clone();
    limiter.on_degraded(move |on| {
        crate::metrics::redis_degraded(on);
        if on {
            tracing::warn!(failure = %failure, "redis unreachable: limits are degraded");
        } else {
            tracing::info!("redis is back: limits are shared again");
        }
    });
    limiter.on_change(capacity_changed);
    if limiter.is_degraded() {
        tracing::warn!(
            url = %crate::config::redact_url(&r.url),
            "redis unreachable at start: limits are degraded"
        );
    }
    Ok(limiter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_model_rates_are_guesses_and_configured_ones_ceilings() {
        let mut config = Config::default();
        let guess = rules(&config).resolve("openai/gpt-4o-mini").unwrap();
        assert!(guess.is_provisional(), "{guess:?}");
        let own = config.models.iter_mut().find(|m| m.prefix == "openai/");
        let own = own.expect("a default rule for openai/");
        own.requests_per_second = 50.0;
        own.guess = false;
        let ceiling = rules(&config).resolve("openai/gpt-4o-mini").unwrap();
        assert!(!ceiling.is_provisional(), "{ceiling:?}");
        let api = rules(&config).resolve("api:slack").unwrap();
        assert!(!api.is_provisional(), "{api:?}");
    }

    #[test]
    fn fractional_rates_become_whole_windows() {
        assert_eq!(rate_limit(3.0, 10), Limit::per_second(3).burst(10));
        assert_eq!(
            rate_limit(2.5, 8),
            Limit::new(25, Duration::from_secs(10)).burst(8)
        );
        assert_eq!(
            rate_limit(0.5, 1),
            Limit::new(5, Duration::from_secs(10)).burst(1)
        );
    }
}
