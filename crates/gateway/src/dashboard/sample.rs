//! One snapshot a second: the limiter's capacities, the admission
//! queue's lanes and tenants, the request totals of the last seconds,
//! and the sources that may be missing (jobs, audit, ledger).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_jobs::JobStore;
use sluice_ledger::{Dim, Granularity, Query};
use tokio::time::Instant;

use super::pulse::{ResourceTotals, TenantTotals, Totals};
use super::view::{
    ByPriority, QueueView, ResourceView, Section, Snapshot, Spend, TenantQueued, TenantSpend,
    TenantView,
};

/// Seconds over which rates, shares and percentiles are counted: long
/// enough for a p99 to mean something at a few requests a second, short
/// enough that a change of load shows within it.
const WINDOW: Duration = Duration::from_secs(5);
/// Rows of models and APIs in one snapshot, busiest first.
const MAX_ROWS: usize = 64;
/// Tenants in one snapshot, busiest first.
const MAX_TENANTS: usize = 50;
/// Tenants listed by queue depth.
const MAX_QUEUED_TENANTS: usize = 20;
/// Job counts, audit entries and spend are queries of a database: read
/// this often at most.
const SLOW_EVERY: Duration = Duration::from_secs(5);
/// How long a store may take to answer before its section says so.
const SLOW_TIMEOUT: Duration = Duration::from_secs(2);
/// Audit entries shown, newest first.
const AUDIT_ENTRIES: u32 = 10;

/// What a snapshot reads: the gateway's parts, borrowed for one
/// snapshot (the jobs, the audit trail and the ledger when they are on).
pub(crate) struct Sources<'a> {
    pub(crate) config: &'a crate::config::Config,
    pub(crate) limits: &'a sluice_limit::SharedLimiter,
    pub(crate) queue: &'a sluice_admit::AdmissionQueue<crate::response::Shared>,
    pub(crate) ledger: Option<&'a std::sync::Arc<crate::ledger::UsageLedger>>,
    pub(crate) jobs: Option<&'a crate::jobs::Jobs>,
    pub(crate) audit: Option<&'a crate::audit::Audit>,
}

/// Takes snapshots; keeps the readings its rates are counted from.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    readings: VecDeque<(Instant, Totals)>,
    jobs: Slow<Vec<sluice_jobs::QueueCounts>>,
    audit: Slow<Vec<serde_json::Value>>,
    spend: Slow<Spend>,
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn kind(state: &Sources<'_>, resource: &str) -> &'static str {
    if resource.starts_with(sluice_limit::API_PREFIX) {
        "api"
    } else if state.config.provider_for(resource).is_some() {
        "model"
    } else {
        "other"
    }
}

/// The configured requests per second and tokens per minute of a model
/// or API.
fn configured(state: &Sources<'_>, resource: &str) -> (Option<f64>, Option<f64>) {
    if let Some(api) = resource.strip_prefix(sluice_limit::API_PREFIX) {
        return (state.config.api(api).map(|a| a.requests_per_second), None);
    }
    match state.config.model_limits(resource) {
        Some(l) => (
            Some(l.requests_per_second),
            l.tokens_per_minute.map(|t| t as f64),
        ),
        None => (None, None),
    }
}

/// Whether the dashboard lists `resource`: not sessions (one per agent
/// thread) nor per-key limits (the operator's, by key id).
fn listed(resource: &str) -> bool {
    !resource.starts_with(sluice_limit::SESSION_PREFIX)
        && !resource.starts_with(crate::limits::resources::CALLER_PREFIX)
}

impl Sampler {
    /// A snapshot of the gateway, read from `state`, now.
    pub(crate) async fn sample(&mut self, state: &Sources<'_>, totals: Totals) -> Snapshot {
        let now = Instant::now();
        self.readings.push_back((now, totals));
        while self
            .readings
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > WINDOW)
            && self.readings.len() > 2
        {
            self.readings.pop_front();
        }
        let (first_at, first) = self.readings.front().expect("pushed above");
        let (_, last) = self.readings.back().expect("pushed above");
        let span = now.duration_since(*first_at).as_secs_f64();
        let window_s = if span > 0.0 {
            span
        } else {
            WINDOW.as_secs_f64()
        };

        let mut rows: BTreeMap<String, ResourceView> = BTreeMap::new();
        fn row<'a>(
            rows: &'a mut BTreeMap<String, ResourceView>,
            state: &Sources<'_>,
            name: &str,
        ) -> &'a mut ResourceView {
            rows.entry(name.to_owned()).or_insert_with(|| ResourceView {
                resource: name.to_owned(),
                kind: kind(state, name).to_owned(),
                ..ResourceView::default()
            })
        }
        // Every configured API, busy or not: a short, fixed list.
        for api in &state.config.apis {
            row(&mut rows, state, &sluice_limit::api_resource(&api.name));
        }
        for c in state.limits.capacities(&listed).await {
            if let Some(model) = c.resource.strip_prefix("tokens:") {
                let r = row(&mut rows, state, model);
                r.tokens_per_minute = Some(c.per_second() * 60.0);
                r.configured_tokens_per_minute = Some(c.configured_per_second() * 60.0);
            } else if c.resource.starts_with("inflight:") {
                // In-flight caps show as the lane's in flight.
            } else {
                let r = row(&mut rows, state, &c.resource);
                r.per_second = Some(c.per_second());
                r.configured_per_second = Some(c.configured_per_second());
                r.limiter_waiting = c.waiting as u64;
                r.reason = c.reason.clone();
            }
        }
        for lane in state.queue.lanes() {
            if listed(&lane.lane) {
                let r = row(&mut rows, state, &lane.lane);
                r.in_flight = lane.in_flight as u64;
                r.queued = ByPriority::from_array(lane.queued_by_priority);
            }
        }
        let zero = ResourceTotals::default();
        for (name, now_t) in &last.resources {
            let then = first.resources.get(name).unwrap_or(&zero);
            let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / window_s;
            let r = row(&mut rows, state, name);
            r.requests_per_second = rate(now_t.requests, then.requests);
            r.admitted_per_second = rate(now_t.admitted, then.admitted);
            r.upstream_429_per_second = rate(now_t.throttled, then.throttled);
            r.retries_per_second = rate(now_t.retries, then.retries);
            r.failed_per_second = rate(now_t.failed, then.failed);
            r.upstream_429_total = now_t.throttled;
            r.retries_total = now_t.retries;
            let recent = now_t.latency.since(&then.latency);
            r.p50_ms = recent.quantile_ms(0.5);
            r.p99_ms = recent.quantile_ms(0.99);
        }
        // The limiter forgets a resource that sits idle and full: it is
        // then at its configured limit.
        for r in rows.values_mut().filter(|r| r.per_second.is_none()) {
            let (requests, tokens) = configured(state, &r.resource);
            r.per_second = requests;
            r.configured_per_second = requests;
            if r.tokens_per_minute.is_none() {
                r.tokens_per_minute = tokens;
                r.configured_tokens_per_minute = tokens;
            }
        }
        let mut resources: Vec<ResourceView> = rows.into_values().collect();
        // Busy and cut resources first, then by kind and name.
        let idle = |r: &ResourceView| {
            r.requests_per_second == 0.0
                && r.in_flight == 0
                && r.queued.total() == 0
                && r.reason.is_none()
        };
        resources.sort_by(|a, b| {
            idle(a)
                .cmp(&idle(b))
                .then_with(|| a.kind.cmp(&b.kind).reverse())
                .then_with(|| a.resource.cmp(&b.resource))
        });
        resources.truncate(MAX_ROWS);

        let stats = state.queue.stats();
        let depths = state
            .queue
            .tenant_depths(MAX_QUEUED_TENANTS.max(MAX_TENANTS));
        let queue = QueueView {
            queued: ByPriority::from_array(stats.queued_by_priority),
            in_flight: stats.in_flight as u64,
            busy: stats.busy,
            by_tenant: depths
                .iter()
                .take(MAX_QUEUED_TENANTS)
                .map(|(t, n)| TenantQueued {
                    tenant: t.to_string(),
                    queued: *n as u64,
                })
                .collect(),
        };
        let tenants = tenants(first, last, window_s, &depths);
        // The three stores are read side by side: a slow one delays the
        // snapshot by its own timeout, not by the sum of them.
        let (jobs, audit, spend) = tokio::join!(
            jobs(&mut self.jobs, state, now),
            audit(&mut self.audit, state, now),
            spend(&mut self.spend, state, now),
        );
        Snapshot {
            at_ms: unix_ms(),
            window_s,
            resources,
            queue,
            tenants,
            jobs,
            audit,
            spend,
        }
    }
}

/// Today's spend per tenant, read again when [`SLOW_EVERY`] has passed:
/// one row per tenant from the day rollups, never the records.
async fn spend(slow: &mut Slow<Spend>, state: &Sources<'_>, now: Instant) -> Section<Spend> {
    slow.read(now, state.ledger, |ledger| async move {
        let now_ms = sluice_ledger::now_ms();
        let since_ms = Granularity::Day.bucket(now_ms);
        let query = Query::new(since_ms, now_ms + 1, Granularity::Day).group_by([Dim::Tenant]);
        let mut rows = ledger
            .store
            .usage(&query)
            .await
            .map_err(|e| crate::error::chain(&e))?;
        rows.sort_by(|a, b| {
            b.cost_nanos
                .cmp(&a.cost_nanos)
                .then_with(|| a.tenant.cmp(&b.tenant))
        });
        rows.truncate(MAX_TENANTS);
        let tenants = rows
            .into_iter()
            .map(|r| TenantSpend {
                tenant: r.tenant.unwrap_or_default(),
                requests: r.requests,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                cost_nanos: r.cost_nanos,
                cost_usd: r.cost_nanos as f64 / 1e9,
                unpriced: r.unpriced,
            })
            .collect();
        Ok(Spend { since_ms, tenants })
    })
    .await
}

/// The job counts, read again when [`SLOW_EVERY`] has passed.
async fn jobs(
    slow: &mut Slow<Vec<sluice_jobs::QueueCounts>>,
    state: &Sources<'_>,
    now: Instant,
) -> Section<Vec<sluice_jobs::QueueCounts>> {
    slow.read(now, state.jobs, |jobs| async move {
        let mut queues = jobs.store().counts().await.map_err(|e| e.to_string())?;
        for name in state.config.jobs.queues.keys() {
            if !queues.iter().any(|q| &q.queue == name) {
                queues.push(sluice_jobs::QueueCounts {
                    queue: name.clone(),
                    paused: false,
                    counts: sluice_jobs::StateCounts::default(),
                });
            }
        }
        queues.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(queues)
    })
    .await
}

/// The newest audit entries, read again when [`SLOW_EVERY`] has passed.
async fn audit(
    slow: &mut Slow<Vec<serde_json::Value>>,
    state: &Sources<'_>,
    now: Instant,
) -> Section<Vec<serde_json::Value>> {
    slow.read(now, state.audit, |audit| async move {
        let filter = sluice_audit::Filter {
            limit: AUDIT_ENTRIES,
            ..sluice_audit::Filter::default()
        };
        let entries = audit
            .store()
            .query(&filter)
            .await
            .map_err(|e| e.to_string())?;
        Ok(entries
            .iter()
            .map(crate::audit::query::entry_json)
            .collect())
    })
    .await
}

/// A section read from a store: at most once per [`SLOW_EVERY`], within
/// [`SLOW_TIMEOUT`]; in between, the last reading.
#[derive(Debug)]
struct Slow<T> {
    last: Option<(Instant, Section<T>)>,
}

impl<T> Default for Slow<T> {
    fn default() -> Self {
        Slow { last: None }
    }
}

impl<T: Clone> Slow<T> {
    /// What `query` reads from `source`, or the last reading while it is
    /// recent; "not configured" when the gateway has no such source.
    async fn read<'s, S: ?Sized, F>(
        &mut self,
        now: Instant,
        source: Option<&'s S>,
        query: impl FnOnce(&'s S) -> F,
    ) -> Section<T>
    where
        F: std::future::Future<Output = Result<T, String>>,
    {
        let Some(source) = source else {
            return Section::not_configured();
        };
        if let Some((at, last)) = &self.last
            && now.duration_since(*at) < SLOW_EVERY
        {
            return last.clone();
        }
        let read = match tokio::time::timeout(SLOW_TIMEOUT, query(source)).await {
            Ok(Ok(data)) => Section::ok(data),
            Ok(Err(e)) => Section::error(e),
            Err(_) => Section::error("the store did not answer in time"),
        };
        self.last = Some((now, read.clone()));
        read
    }
}

/// Tenants by requests in the window, then since start.
fn tenants(
    first: &Totals,
    last: &Totals,
    window_s: f64,
    depths: &[(std::sync::Arc<str>, usize)],
) -> Vec<TenantView> {
    let zero = TenantTotals::default();
    let delta = |name: &str, t: &TenantTotals| {
        let then = first.tenants.get(name).unwrap_or(&zero);
        (
            t.requests.saturating_sub(then.requests),
            t.admitted.saturating_sub(then.admitted),
            t.queue_wait.saturating_sub(then.queue_wait),
        )
    };
    let all: u64 = last.tenants.iter().map(|(n, t)| delta(n, t).0).sum();
    let mut out: Vec<TenantView> = last
        .tenants
        .iter()
        .map(|(name, t)| {
            let (requests, admitted, waited) = delta(name, t);
            TenantView {
                tenant: name.to_string(),
                requests_per_second: requests as f64 / window_s,
                share: if all > 0 {
                    requests as f64 / all as f64
                } else {
                    0.0
                },
                queue_wait_ms: (admitted > 0).then(|| waited.as_secs_f64() * 1e3 / admitted as f64),
                requests_total: t.requests,
                queued: depths
                    .iter()
                    .find(|(d, _)| **d == **name)
                    .map_or(0, |(_, n)| *n as u64),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.requests_per_second
            .total_cmp(&a.requests_per_second)
            .then_with(|| b.requests_total.cmp(&a.requests_total))
            .then_with(|| a.tenant.cmp(&b.tenant))
    });
    out.truncate(MAX_TENANTS);
    out
}
