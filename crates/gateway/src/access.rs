//! The access log: one line per request, at info, under the target
//! [`TARGET`] (so `SLUICE_LOG=warn` or a filter on the target silences
//! it), in the format of the process's other lines (`SLUICE_LOG_FORMAT`:
//! readable lines or JSON, see `sluice serve --help`).
//!
//! Who writes the line:
//! - the [`Edge`](crate::routes::edge) for every answer, when its head
//!   goes out: method, path, status, time and request id, plus what a
//!   model or API call learnt on its way ([`Call`], a response extension
//!   that observe leaves);
//! - the stream's relay, when a streamed answer ends (its tokens and cost
//!   are known only then): the answer's head carries [`Later`] so that
//!   the edge leaves the line to it;
//! - observe, for a request whose client went away before its answer
//!   (status 499), which no edge sees answered.
//!
//! A line holds no header, body, key or query string: the path is cut at
//! its `?`, and a key appears only as its id.

use std::time::Duration;

use sluice_ledger::Record;

/// The target of access lines.
pub const TARGET: &str = "sluice::access";

/// The longest path written; a longer one is cut (and marked `…`).
const MAX_PATH: usize = 256;

/// What a model or API call learnt of itself, for its access line.
#[derive(Debug, Clone, Default)]
pub(crate) struct Call {
    pub tenant: Option<String>,
    pub key_id: Option<String>,
    /// The model or API.
    pub target: Option<String>,
    /// The provider (deployment) that served it.
    pub upstream: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_nanos: u64,
    /// Tokens of a model without a price: the cost is unknown, not 0.
    pub unpriced: bool,
    pub queue_ms: u64,
    /// From leaving the queue to the answer: the limiter's wait and the
    /// upstream attempts.
    pub upstream_ms: u64,
    pub request_id: Option<String>,
}

impl Call {
    /// What `record` (a ledger record, as handed over) tells.
    pub(crate) fn of(record: &Record) -> Call {
        Call {
            tenant: Some(record.tenant.clone()),
            key_id: record.key_id.clone(),
            target: Some(record.model.clone()),
            upstream: (!record.provider.is_empty()).then(|| record.provider.clone()),
            prompt_tokens: record.prompt_tokens,
            completion_tokens: record.completion_tokens,
            cost_nanos: record.cost_nanos,
            unpriced: record.unpriced,
            queue_ms: record.queue_ms,
            upstream_ms: record.latency_ms.saturating_sub(record.queue_ms),
            request_id: Some(record.request_id.clone()),
        }
    }
}

/// On a response whose access line the stream's relay writes when the
/// stream ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Later;

/// Whether access lines are written at all (checked before gathering
/// what they hold).
pub(crate) fn on() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Writes one access line.
pub(crate) fn line(
    method: &str,
    path: &str,
    status: u16,
    took: Duration,
    request_id: &str,
    call: Option<&Call>,
) {
    let empty = Call::default();
    let c = call.unwrap_or(&empty);
    let request_id = c.request_id.as_deref().unwrap_or(request_id);
    tracing::info!(
        target: TARGET,
        method,
        path = %bounded_path(path),
        status,
        ms = took.as_millis() as u64,
        tenant = c.tenant.as_deref().unwrap_or("-"),
        key = c.key_id.as_deref().unwrap_or("-"),
        model = c.target.as_deref().unwrap_or("-"),
        upstream = c.upstream.as_deref().unwrap_or("-"),
        prompt_tokens = c.prompt_tokens,
        completion_tokens = c.completion_tokens,
        cost_usd = c.cost_nanos as f64 / 1e9,
        unpriced = c.unpriced,
        queue_ms = c.queue_ms,
        upstream_ms = c.upstream_ms,
        request_id,
        "request"
    );
}

/// `path` without its query, at most [`MAX_PATH`] bytes.
fn bounded_path(path: &str) -> std::borrow::Cow<'_, str> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if path.len() <= MAX_PATH {
        return path.into();
    }
    let mut end = MAX_PATH;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_loses_its_query_and_is_cut_at_its_bound() {
        assert_eq!(bounded_path("/v1/models?key=secret"), "/v1/models");
        let long = format!("/proxy/{}", "é".repeat(400));
        let cut = bounded_path(&long);
        assert!(cut.len() <= MAX_PATH + '…'.len_utf8(), "{}", cut.len());
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_record_tells_its_upstream_time_apart_from_its_queue() {
        let mut r = Record::new(
            "req-1",
            "acme",
            "model",
            "openai",
            "openai/gpt-4o-mini",
            "/v1/chat/completions",
        );
        r.latency_ms = 120;
        r.queue_ms = 20;
        r.key_id = Some("k1".into());
        let c = Call::of(&r);
        assert_eq!(c.upstream_ms, 100);
        assert_eq!(c.upstream.as_deref(), Some("openai"));
        assert_eq!(c.key_id.as_deref(), Some("k1"));
    }
}
