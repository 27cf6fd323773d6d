//! Checks of `[otel]`: a collector URL, headers that can be sent, a
//! sampling ratio, and a queue that holds a batch.

use super::{Checks, key};
use crate::config::Config;
use crate::config::load::ConfigError;

pub(super) fn otel(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let Some(o) = &config.otel else {
        return Ok(());
    };
    let at = |k: &str| key(&["otel", k]);
    c.base_url(at("endpoint"), &o.endpoint)?;
    for (name, value) in &o.headers {
        if let Err(problem) = crate::config::otel::header(name, value) {
            return Err(c.fail(key(&["otel", "headers", name]), problem));
        }
    }
    c.not_empty(at("service_name"), &o.service_name)?;
    if !(o.sampling_ratio.is_finite() && (0.0..=1.0).contains(&o.sampling_ratio)) {
        return Err(c.fail(
            at("sampling_ratio"),
            format!("must be between 0 and 1, not {}", o.sampling_ratio),
        ));
    }
    c.at_least(at("batch_size"), o.batch_size as u64, 1)?;
    c.at_least(at("batch_interval_ms"), o.batch_interval_ms, 1)?;
    c.at_least(at("timeout_ms"), o.timeout_ms, 1)?;
    if o.queue_size < o.batch_size {
        return Err(c.fail_either(
            [at("queue_size"), at("batch_size")],
            format!(
                "queue_size ({}) must be at least batch_size ({}): the queue must hold one batch",
                o.queue_size, o.batch_size
            ),
        ));
    }
    Ok(())
}
