//! The worker pool `sluice serve` runs: the configured queues, the
//! standard kinds calling the configured APIs and the embedder's own
//! kinds ([`Kinds`]), all on the gateway's own
//! limits (through Redis with `[redis]`), so that a job calling Slack
//! takes from `api:slack` as a proxied call does, on any replica.

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{Kinds, QueueConfig, WorkerPool};
use sluice_jobs_http::callback::{CALLBACK_KIND, CallbackConfig, CallbackHandler};
use sluice_jobs_http::discord::DiscordConfig;
use sluice_jobs_http::http::HttpApis;
use sluice_limit::Limit;
use sluice_limit::SharedLimiter;

use super::AnyStore;
use crate::config::Config;
use crate::credentials::UpstreamCredentials;
use crate::error::StartError;
use crate::ledger::UsageLedger;

/// Starts workers for every configured queue.
#[allow(clippy::too_many_arguments)] // the start-up order's parts, each used once
///
/// # Errors
/// [`StartError::Workers`] naming the API or queue that cannot be used.
pub(super) fn start(
    config: &Config,
    credentials: &UpstreamCredentials,
    store: AnyStore,
    kinds: &Kinds,
    callbacks: Option<CallbackConfig>,
    limiter: SharedLimiter,
    client: reqwest::Client,
    otel: Option<&sluice_otel::Exporter>,
    ledger: Option<&Arc<UsageLedger>>,
    keys: Option<sluice_keys::KeyStore>,
) -> Result<WorkerPool, StartError> {
    let j = &config.jobs;
    let apis = http_apis(config, credentials)?;
    let mut handlers = sluice_jobs_http::handlers(
        limiter.clone(),
        apis,
        discord(config, credentials),
        client.clone(),
    )
    .map_err(|e| workers("discord limit", e))?
    .merge(kinds.handlers());
    if let Some(callbacks) = callbacks {
        handlers = handlers.on(CALLBACK_KIND, CallbackHandler::new(callbacks, client));
    }
    if let Some(ledger) = ledger {
        // Every attempt leaves a ledger record.
        handlers = crate::ledger::recorded(&handlers, ledger);
    }
    if let Some(exporter) = otel {
        handlers = super::traced::traced(handlers, exporter);
    }
    if let Some(keys) = keys {
        // Outermost: a blocked tenant's job calls nothing, and its
        // attempt leaves no span.
        handlers = super::admitted::admitted(handlers, keys);
    }
    let mut pool = WorkerPool::builder(Arc::new(store), limiter)
        .handlers(handlers)
        .configure(|p| {
            p.lease = Duration::from_millis(j.lease_ms);
            p.heartbeat = Duration::from_millis(j.heartbeat_ms);
            // Retention is the gateway's cleaner's (it runs without workers too).
            p.cleanup_every = None;
        });
    for (name, q) in &j.queues {
        let mut queue = QueueConfig::new(name.clone())
            .concurrency(q.concurrency as usize)
            .rate(per_second(q.rate));
        if let Some(rate) = q.group_rate {
            queue = queue.group_rate(per_second(rate));
        }
        if let Some(n) = q.prefetch {
            queue = queue.prefetch(n as usize);
        }
        if let Some(n) = q.awaiting_commit {
            queue = queue.awaiting_commit(n as usize);
        }
        pool = pool.queue(queue);
    }
    pool.start().map_err(|e| workers("queue rates", e))
}

/// The workers cannot start: `what` cannot be used, for `why`.
fn workers(what: &str, why: impl std::error::Error + Send + Sync + 'static) -> StartError {
    StartError::Workers {
        what: what.to_owned(),
        source: Box::new(why),
    }
}

/// `rate` starts a second as a sliding window (so that no window of that
/// length ever holds more): whole numbers per second, fractions over the
/// smallest power-of-ten window that makes them whole (0.5/s → 5 per 10 s).
fn per_second(rate: f64) -> Limit {
    let mut window = 1u64;
    while (rate * window as f64).fract().abs() > 1e-9 && window < 1_000 {
        window *= 10;
    }
    let capacity = ((rate * window as f64).round() as u64).max(1);
    Limit::sliding_window(capacity, Duration::from_secs(window))
}

/// Every configured API by name, at the base URL `/proxy/{api}/` uses, with
/// the credentials a proxied call sends (the job's tenant's own token, else
/// the shared one where it is shared; `Bot` for Discord, `Bearer` for the
/// others).
fn http_apis(config: &Config, credentials: &UpstreamCredentials) -> Result<HttpApis, StartError> {
    let mut apis = HttpApis::new();
    for api in &config.apis {
        apis = apis
            .api(&api.name, &api.base_url)
            .map_err(|e| workers(&format!("api {}", api.name), e))?;
        let creds = credentials.api(&api.name);
        if !creds.is_none() {
            let prefix = if api.name == "discord" {
                "Bot "
            } else {
                "Bearer "
            };
            apis = apis.auth(&api.name, "Authorization", prefix, creds.clone());
        }
    }
    Ok(apis)
}

/// The Discord kinds call the configured `discord` API, limited by its
/// configured rate (`api:discord`) rather than one of their own, with its
/// credentials.
fn discord(config: &Config, credentials: &UpstreamCredentials) -> DiscordConfig {
    let api = config.api("discord");
    DiscordConfig {
        base_url: api.map_or_else(|| DiscordConfig::default().base_url, |a| a.base_url.clone()),
        token: credentials.api("discord").clone(),
        global_limit: None,
        ..DiscordConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_become_sliding_windows() {
        assert_eq!(
            per_second(10.0),
            Limit::sliding_window(10, Duration::from_secs(1))
        );
        assert_eq!(
            per_second(0.5),
            Limit::sliding_window(5, Duration::from_secs(10))
        );
        assert_eq!(
            per_second(2.25),
            Limit::sliding_window(225, Duration::from_secs(100))
        );
    }
}
