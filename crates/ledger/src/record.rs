//! [`Record`]: one call, as the ledger keeps it.

use std::time::SystemTime;

use sluice_store::now_ms;

use serde::{Deserialize, Serialize};

use crate::Bodies;

/// One model call, proxied API call or job attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When it was answered, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The record's own key: one per call, made by the gateway (see
    /// [`Record::new`]), or `job:{id}#{attempt}` for a job attempt. The
    /// store keeps one record per key, so that a record written twice (a
    /// spill file replayed again after a crash, a batch spilled while a
    /// stalled write went through after all) counts once. Not the
    /// client's `x-request-id`: clients send the same id again when they
    /// retry (two calls, both billed), and one tenant could name another's.
    /// Empty in spill files of versions before it: [`Record::key`] then
    /// derives one from the record.
    #[serde(default)]
    pub uid: String,
    /// The request id (`x-request-id`) or the job's id and attempt.
    pub request_id: String,
    /// The tenant (workspace) that called.
    pub tenant: String,
    /// The API key's id, for keys from the key store.
    pub key_id: Option<String>,
    /// The end user (`x-sluice-user`, or the body's `user`).
    pub user: Option<String>,
    /// The feature (`x-sluice-feature`).
    pub feature: Option<String>,
    /// `model`, `api`, `job` or `tool` (an MCP tool call through `/mcp`).
    pub kind: String,
    /// The provider or API called.
    pub provider: String,
    /// The model served (the API's name for API calls, the job's kind for
    /// job attempts, `{server}.{tool}` for tool calls).
    pub model: String,
    /// The route (`/v1/chat/completions`, `/proxy/slack`, `job:http`).
    pub endpoint: String,
    /// The HTTP status answered (0: no answer, e.g. a job attempt that
    /// could not connect).
    pub status: u16,
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Output tokens, reasoning included.
    pub completion_tokens: u64,
    /// Of the input, tokens read from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Of the output, reasoning tokens.
    pub reasoning_tokens: u64,
    /// Whether the tokens are the gateway's estimate (the provider
    /// reported none, or a stream was cut before its usage came).
    pub estimated: bool,
    /// What it cost, in nanodollars (0 for a model without a price, then
    /// marked [`unpriced`](Self::unpriced)).
    pub cost_nanos: u64,
    /// From the request's arrival to its answer (a stream's end).
    pub latency_ms: u64,
    /// Time spent waiting: the admission queue, the limiter, the pool.
    pub queue_ms: u64,
    /// Upstream attempts beyond the first.
    pub retries: u32,
    /// Answered from the response cache.
    pub cache_hit: bool,
    /// A model call that used tokens of a model without a price: its
    /// cost is unknown, not 0. Absent in spill files of older versions.
    #[serde(default)]
    pub unpriced: bool,
    /// The name the client called, when it was an alias (`model` is the
    /// model it stands for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The deployment of a capacity pool that served the call
    /// (`{provider}/{upstream model}`; `model` is the pool's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    /// The call's bodies, redacted and cut, when `[request_log] bodies`
    /// keeps them; stored beside the record (`usage_bodies`) with its key,
    /// in the same transaction. Absent in spill files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bodies: Option<Bodies>,
}

impl Record {
    /// A record of a call now, with no usage yet, under a new key
    /// ([`Record::uid`]) unique to it.
    pub fn new(
        request_id: impl Into<String>,
        tenant: impl Into<String>,
        kind: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
        endpoint: impl Into<String>,
    ) -> Record {
        Record {
            at_ms: now_ms(),
            uid: new_uid(),
            request_id: request_id.into(),
            tenant: tenant.into(),
            key_id: None,
            user: None,
            feature: None,
            kind: kind.into(),
            provider: provider.into(),
            model: model.into(),
            endpoint: endpoint.into(),
            status: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            reasoning_tokens: 0,
            estimated: false,
            cost_nanos: 0,
            latency_ms: 0,
            queue_ms: 0,
            retries: 0,
            cache_hit: false,
            unpriced: false,
            alias: None,
            deployment: None,
            bodies: None,
        }
    }

    /// The key the store keeps the record under: its [`uid`](Self::uid),
    /// or for a record without one (spilled by an older version) one made
    /// of its request id, time and latency, the same each time the line
    /// is read again.
    pub fn key(&self) -> std::borrow::Cow<'_, str> {
        if self.uid.is_empty() {
            std::borrow::Cow::Owned(format!(
                "spill:{}:{}:{}:{}",
                self.tenant, self.request_id, self.at_ms, self.latency_ms
            ))
        } else {
            std::borrow::Cow::Borrowed(&self.uid)
        }
    }

    /// Whether the call failed (no answer, or a status of 400 and above).
    pub fn is_error(&self) -> bool {
        self.status == 0 || self.status >= 400
    }
}

/// A key no other record has: 64 random bits chosen once per process,
/// then a counter (128 bits, 32 hex digits). The random half keeps two
/// processes (a gateway restarted, several replicas on one PostgreSQL)
/// apart; the counter keeps a process's records apart.
fn new_uid() -> String {
    use std::hash::BuildHasher;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        // std's hasher keys come from the OS's random source.
        std::collections::hash_map::RandomState::new()
            .hash_one((std::process::id(), SystemTime::now()))
    });
    format!(
        "{process:016x}{:016x}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
