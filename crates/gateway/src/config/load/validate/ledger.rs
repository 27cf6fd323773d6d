//! Checks of `[ledger]`, `[pricing]` and `[prices]`: a store the gateway
//! can open, usable sizes, a price map that reads, prices that read as
//! exact decimals.

use super::{Checks, Seg, key};
use crate::config::Config;
use crate::config::load::ConfigError;
use sluice_usage::Price;

pub(super) fn ledger(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let l = &config.ledger;
    super::keys::store_beside_jobs(c, "ledger", &l.store)?;
    c.at_least(key(&["ledger", "queue"]), l.queue as u64, 1)?;
    c.at_least(key(&["ledger", "batch"]), l.batch as u64, 1)?;
    if l.batch > 10_000 {
        return Err(c.fail(
            key(&["ledger", "batch"]),
            format!("must be at most 10000, not {}", l.batch),
        ));
    }
    c.at_least(key(&["ledger", "metric_labels"]), l.metric_labels as u64, 1)?;
    let max = config.request_log.max_body_bytes;
    c.at_least(key(&["request_log", "max_body_bytes"]), max as u64, 1)?;
    if max > crate::config::MAX_BODY_BYTES {
        return Err(c.fail(
            key(&["request_log", "max_body_bytes"]),
            format!(
                "must be at most {} (1 MiB), not {max}",
                crate::config::MAX_BODY_BYTES
            ),
        ));
    }
    // The shipped map is checked by sluice-usage's tests; only a file of
    // one's own is read here (the gateway reads it again when it starts).
    let own_file = !matches!(config.pricing.catalog.as_str(), "shipped" | "none");
    if own_file && let Err(e) = crate::config::catalog(&config.pricing) {
        return Err(c.fail(key(&["pricing", "catalog"]), e.reason));
    }
    prices(c, config)
}

fn prices(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    for (prefix, p) in &config.prices {
        let at = |field: &str| {
            vec![
                Seg::Key("prices".into()),
                Seg::Key(prefix.clone()),
                Seg::Key(field.into()),
            ]
        };
        if prefix.is_empty() {
            return Err(c.fail(key(&["prices"]), "a model prefix must not be empty"));
        }
        if let Err(e) = Price::per_million(
            &p.input.0,
            &p.output.0,
            p.cached_input.as_ref().map(|d| d.0.as_str()),
        ) {
            return Err(c.fail(at(&e.field), e.reason));
        }
    }
    Ok(())
}
