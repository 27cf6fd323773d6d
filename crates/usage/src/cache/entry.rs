//! What the cache holds for one answer.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Scope;
use crate::Usage;

/// Response headers worth keeping with a cached answer. Rate-limit
/// headers, request ids, dates and cookies describe the original call and
/// would be wrong on a replay.
pub const STORED_HEADERS: &[&str] = &["content-type", "openai-model", "openai-version"];

/// Bytes counted per entry beyond its body and headers (key, bookkeeping,
/// the map's own node, the allocator's rounding), so that `max_bytes`
/// bounds the memory the cache takes whatever the answers' size: measured
/// at 820–1,110 bytes per entry (`cargo bench -p sluice-usage --bench
/// cache_memory`).
pub const ENTRY_OVERHEAD_BYTES: u64 = 1_024;

/// A whole answer as the client would receive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status; only 200 is stored.
    pub status: u16,
    /// Response headers, lowercase names; keep only [`STORED_HEADERS`]
    /// (see [`Answer::keep_header`]).
    pub headers: Vec<(String, String)>,
    /// The body: the whole JSON answer (a streamed answer is stored
    /// assembled, see [`super::StreamCapture`]).
    pub body: Bytes,
}

impl Answer {
    /// Whether a response header is kept with a cached answer.
    pub fn keep_header(name: &str) -> bool {
        STORED_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// A successful JSON answer with only a `content-type` header.
    pub fn json(body: impl Into<Bytes>) -> Self {
        Answer {
            status: 200,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: body.into(),
        }
    }

    fn bytes(&self) -> u64 {
        let headers: usize = self.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        (self.body.len() + headers) as u64
    }
}

/// An answer to store, before [`super::ResponseCache::entry`] checks and
/// stamps it.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// Whose entry it is; must be the scope its key was made with.
    pub scope: Scope,
    /// The model asked for, for per-model stats and invalidation.
    pub model: String,
    /// The answer.
    pub answer: Answer,
    /// What the original call used: a hit saves this much.
    pub usage: Option<Usage>,
    /// How long it may be served; `None` for the cache's TTL. Cut to the
    /// cache's `max_ttl`.
    pub ttl: Option<Duration>,
}

/// A stored answer.
#[derive(Debug)]
pub struct Entry {
    pub(super) scope: Scope,
    pub(super) model: String,
    pub(super) answer: Answer,
    pub(super) usage: Option<Usage>,
    pub(super) stored_at: Instant,
    pub(super) ttl: Duration,
    /// When it was last served, as nanoseconds after `stored_at`.
    last_used: AtomicU64,
    weight: u32,
}

impl Entry {
    pub(super) fn new(new: NewEntry, stored_at: Instant, ttl: Duration, weight: u32) -> Self {
        Entry {
            scope: new.scope,
            model: new.model,
            answer: new.answer,
            usage: new.usage,
            stored_at,
            ttl,
            last_used: AtomicU64::new(0),
            weight,
        }
    }

    /// What an entry for `answer` and `model` weighs, in bytes.
    pub(super) fn weigh(answer: &Answer, model: &str) -> u64 {
        answer.bytes() + model.len() as u64 + ENTRY_OVERHEAD_BYTES
    }

    /// The stored answer.
    pub fn answer(&self) -> &Answer {
        &self.answer
    }

    /// Whose entry it is.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The model it answers for.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// What the original call used.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// How long it may be served after it was stored.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Its weight in the byte bound.
    pub fn weight(&self) -> u32 {
        self.weight
    }

    /// How old it is at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.stored_at)
    }

    /// Whether it may still be served at `now`: younger than its TTL and,
    /// with an idle limit, served or stored less than `idle` ago.
    pub(super) fn is_fresh(&self, now: Instant, idle: Option<Duration>) -> bool {
        let age = self.age(now);
        if age >= self.ttl {
            return false;
        }
        let Some(idle) = idle else { return true };
        let last = Duration::from_nanos(self.last_used.load(Relaxed));
        age.saturating_sub(last) < idle
    }

    /// Notes that it was served at `now`, for the idle limit.
    pub(super) fn touch(&self, now: Instant) {
        let age = u64::try_from(self.age(now).as_nanos()).unwrap_or(u64::MAX);
        self.last_used.fetch_max(age, Relaxed);
    }
}
