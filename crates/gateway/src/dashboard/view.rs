//! What the dashboard shows, as `GET /v1/dashboard` answers it and the
//! stream sends it: one [`Snapshot`] a second, and a short [`Point`]
//! history. `sluice top` reads the same types.

use serde::{Deserialize, Serialize};

/// Everything the dashboard shows at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was taken, ms since the Unix epoch.
    pub at_ms: u64,
    /// Seconds over which rates, shares and percentiles are counted.
    pub window_s: f64,
    /// Models and APIs: limits, load and latency.
    pub resources: Vec<ResourceView>,
    /// The admission queue as a whole.
    pub queue: QueueView,
    /// Tenants by traffic, busiest first.
    pub tenants: Vec<TenantView>,
    /// Durable jobs by queue and state.
    pub jobs: Section<Vec<sluice_jobs::QueueCounts>>,
    /// The most recent administrative acts, newest first.
    pub audit: Section<Vec<serde_json::Value>>,
    /// Spend per tenant today, from the usage ledger's rollups.
    pub spend: Section<Spend>,
}

/// What tenants spent since the start of the day (UTC), as the usage
/// ledger's day rollups say: the same figures as `GET /v1/usage` with
/// `from={since_ms}&granularity=day`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The day's start, ms since the Unix epoch.
    pub since_ms: i64,
    /// The biggest spenders first (at most 50).
    pub tenants: Vec<TenantSpend>,
}

/// One tenant's spend in [`Spend`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantSpend {
    /// The tenant (workspace).
    pub tenant: String,
    /// Calls recorded.
    pub requests: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Exactly, in nanodollars.
    pub cost_nanos: u64,
    /// In dollars, for display.
    pub cost_usd: f64,
    /// Calls of a model without a price (their cost is not in
    /// `cost_usd`).
    #[serde(default)]
    pub unpriced: u64,
}

/// A part of the snapshot read from a source that may be missing: its
/// state, and what it gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section<T> {
    /// `ok`, `not configured` or `error: …`.
    pub state: String,
    /// What the source gave, when it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<T>,
}

impl<T> Default for Section<T> {
    fn default() -> Self {
        Section::not_configured()
    }
}

impl<T> Section<T> {
    /// The source is not part of this gateway's configuration.
    pub fn not_configured() -> Self {
        Section {
            state: "not configured".into(),
            data: None,
        }
    }

    /// The source answered.
    pub fn ok(data: T) -> Self {
        Section {
            state: "ok".into(),
            data: Some(data),
        }
    }

    /// The source failed this time.
    pub fn error(why: impl std::fmt::Display) -> Self {
        Section {
            state: format!("error: {why}"),
            data: None,
        }
    }
}

/// One model or API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceView {
    /// The limiter resource: the model (`openai/gpt-4o-mini`) or `api:{name}`.
    pub resource: String,
    /// `model`, `api` or `other`.
    pub kind: String,
    /// Requests per second as configured; `None` without a request limit.
    pub configured_per_second: Option<f64>,
    /// Requests per second in force now (lower while cut).
    pub per_second: Option<f64>,
    /// Why the limit in force differs from the configured one (a cut
    /// after 429s, a `Retry-After` pause, a rate the upstream announced,
    /// the Redis capacity bus, a report through the limiter API).
    pub reason: Option<String>,
    /// Tokens per minute as configured and in force, when limited.
    pub configured_tokens_per_minute: Option<f64>,
    /// Tokens per minute in force.
    pub tokens_per_minute: Option<f64>,
    /// Attempts sent upstream per second (each cleared the limiter).
    pub admitted_per_second: f64,
    /// Requests answered per second.
    pub requests_per_second: f64,
    /// Admitted requests running now (their admission slot held).
    pub in_flight: u64,
    /// Requests waiting in the admission queue, by priority.
    pub queued: ByPriority,
    /// Attempts waiting in the limiter.
    pub limiter_waiting: u64,
    /// Upstream 429s per second, and since start.
    pub upstream_429_per_second: f64,
    /// Upstream 429s since start.
    pub upstream_429_total: u64,
    /// Retries per second, and since start.
    pub retries_per_second: f64,
    /// Retries since start.
    pub retries_total: u64,
    /// Answers of 429 or 5xx to clients per second.
    pub failed_per_second: f64,
    /// Latency, arrival to answer, over the window.
    pub p50_ms: Option<f64>,
    /// Latency, arrival to answer, over the window.
    pub p99_ms: Option<f64>,
}

/// A count per priority class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByPriority {
    /// `high`.
    pub high: u64,
    /// `normal`.
    pub normal: u64,
    /// `low`.
    pub low: u64,
}

impl ByPriority {
    /// From counts ordered highest first (`sluice_admit` order).
    pub fn from_array(a: [usize; 3]) -> Self {
        ByPriority {
            high: a[0] as u64,
            normal: a[1] as u64,
            low: a[2] as u64,
        }
    }

    /// All classes.
    pub fn total(&self) -> u64 {
        self.high + self.normal + self.low
    }
}

/// The admission queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    /// Waiting, by priority.
    pub queued: ByPriority,
    /// Slots held.
    pub in_flight: u64,
    /// The backlog exceeds twice the dispatch concurrency.
    pub busy: bool,
    /// Waiting, by tenant, deepest first (at most 20).
    pub by_tenant: Vec<TenantQueued>,
}

/// A tenant's entries in the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantQueued {
    /// The tenant.
    pub tenant: String,
    /// Entries waiting.
    pub queued: u64,
}

/// One tenant's traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantView {
    /// The tenant (workspace).
    pub tenant: String,
    /// Requests answered per second.
    pub requests_per_second: f64,
    /// Its share of all requests answered in the window (0–1).
    pub share: f64,
    /// Mean time its requests waited in the admission queue, over the window.
    pub queue_wait_ms: Option<f64>,
    /// Requests answered since start.
    pub requests_total: u64,
    /// Entries it has waiting now.
    pub queued: u64,
}

/// One second of the history the charts draw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// Waiting in the admission queue, all priorities.
    pub queued: u64,
    /// Slots held.
    pub in_flight: u64,
    /// Per resource: `[admitted/s, limit/s (null: none), p99 ms (null:
    /// no answer), upstream 429/s]`.
    pub resources: std::collections::BTreeMap<String, [Option<f64>; 4]>,
}

impl Point {
    /// The point of a snapshot: the resources with traffic, queued or
    /// in flight.
    pub fn of(s: &Snapshot) -> Point {
        Point {
            at_ms: s.at_ms,
            queued: s.queue.queued.total(),
            in_flight: s.queue.in_flight,
            resources: s
                .resources
                .iter()
                .filter(|r| r.requests_per_second > 0.0 || r.in_flight > 0 || r.queued.total() > 0)
                .map(|r| {
                    (
                        r.resource.clone(),
                        [
                            Some(r.admitted_per_second),
                            r.per_second,
                            r.p99_ms,
                            Some(r.upstream_429_per_second),
                        ],
                    )
                })
                .collect(),
        }
    }
}
