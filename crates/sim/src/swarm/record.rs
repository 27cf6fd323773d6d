//! What the agents saw, call by call, folded as it happens into counters
//! per target and per tenant and one latency histogram, so that a live
//! view can read progress and the report needs no second pass.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies above this (an hour) are recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// How one call (with its retries) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A 2xx answer, read to its end.
    Ok,
    /// Retries spent on 429s, 5xx or transport errors, or a 4xx.
    Failed,
}

/// One finished call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub tenant: usize,
    pub target: usize,
    /// From the first send to the end of the last answer, backoff included.
    pub latency: Duration,
    pub outcome: Outcome,
    /// Requests sent: 1 + retries.
    pub attempts: u32,
    /// Answers that did no work: 429s, 5xx, transport errors.
    pub wasted: u32,
    /// 429s that came from the upstream (directly, or as the gateway
    /// reported its own attempts).
    pub upstream_429s: u32,
    /// Time the agent slept between attempts.
    pub backoff: Duration,
}

/// Counters of one model or API, as the agents saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetProgress {
    /// The model (as the provider names it) or API.
    pub name: String,
    /// `model` or `api`.
    pub kind: String,
    /// Calls answered 2xx.
    pub ok: u64,
    /// Calls that gave up.
    pub failed: u64,
    /// Requests sent, retries included.
    pub attempts: u64,
    /// Requests that did no work.
    pub wasted: u64,
    /// 429s from the upstream.
    pub upstream_429s: u64,
    /// Calls under way now (sending, queued at the gateway, or backing off).
    pub in_flight: u64,
    /// Of those, agents sleeping before a retry now.
    pub backing_off: u64,
    /// Sum of finished calls' latencies, in milliseconds.
    pub latency_ms_sum: f64,
}

/// Counters of one tenant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantProgress {
    /// Its name (`x-sluice-workspace`).
    pub name: String,
    /// Agents it runs.
    pub agents: usize,
    /// Calls answered 2xx: its goodput.
    pub ok: u64,
    /// Calls that gave up.
    pub failed: u64,
}

#[derive(Debug)]
struct Counts {
    targets: Vec<TargetProgress>,
    tenants: Vec<TenantProgress>,
    /// Latency of successful calls, in microseconds.
    latency: Histogram<u64>,
    /// Time to finish every task, successful or given up, in microseconds.
    task_time: Histogram<u64>,
}

#[derive(Debug)]
pub(crate) struct Tally {
    counts: Mutex<Counts>,
}

impl Tally {
    pub(crate) fn new(targets: Vec<TargetProgress>, tenants: Vec<TenantProgress>) -> Self {
        Tally {
            counts: Mutex::new(Counts {
                targets,
                tenants,
                latency: latency_histogram(),
                task_time: latency_histogram(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call to `target` begins. It counts as under way until
    /// [`InFlight::finish`]: an agent stopped mid-call leaves it so, which
    /// is what "unfinished" means in the report.
    pub(crate) fn begin(&self, target: usize) -> InFlight<'_> {
        self.lock().targets[target].in_flight += 1;
        InFlight { tally: self }
    }

    pub(crate) fn backing_off(&self, target: usize, on: bool) {
        let mut c = self.lock();
        let t = &mut c.targets[target];
        if on {
            t.backing_off += 1;
        } else {
            t.backing_off = t.backing_off.saturating_sub(1);
        }
    }

    pub(crate) fn targets(&self) -> Vec<TargetProgress> {
        self.lock().targets.clone()
    }

    pub(crate) fn tenants(&self) -> Vec<TenantProgress> {
        self.lock().tenants.clone()
    }

    pub(crate) fn latency(&self) -> Histogram<u64> {
        self.lock().latency.clone()
    }

    pub(crate) fn task_time(&self) -> Histogram<u64> {
        self.lock().task_time.clone()
    }
}

/// A call under way; [`InFlight::finish`] records it.
#[derive(Debug)]
#[must_use = "a call is counted under way until finished"]
pub(crate) struct InFlight<'a> {
    tally: &'a Tally,
}

impl InFlight<'_> {
    pub(crate) fn finish(self, r: Record) {
        let mut c = self.tally.lock();
        let us = (r.latency.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        c.task_time.saturating_record(us);
        let t = &mut c.targets[r.target];
        t.in_flight = t.in_flight.saturating_sub(1);
        t.attempts += u64::from(r.attempts);
        t.wasted += u64::from(r.wasted);
        t.upstream_429s += u64::from(r.upstream_429s);
        t.latency_ms_sum += r.latency.as_secs_f64() * 1e3;
        let ok = r.outcome == Outcome::Ok;
        if ok {
            t.ok += 1;
            c.tenants[r.tenant].ok += 1;
            c.latency.saturating_record(us);
        } else {
            t.failed += 1;
            c.tenants[r.tenant].failed += 1;
        }
    }
}

/// A histogram for latencies in microseconds, 1 µs to an hour, 3
/// significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Calls measured.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Percentiles {
    /// Of a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1e3;
        Percentiles {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1e3,
        }
    }
}
