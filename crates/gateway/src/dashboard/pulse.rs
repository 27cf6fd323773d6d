//! What the dashboard counts of each finished request: totals per
//! resource (the model or API it waited for) and per tenant, since start.
//!
//! Rates and percentiles are differences between two readings of these
//! totals (see [`super::sample`]), so recording is one short lock and a
//! few additions, and nothing here ages or decays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use foldhash::fast::RandomState;

/// Resources counted apart; the rest share [`OTHER`]. Resources are
/// configured models and APIs, but a model's name comes from the request.
pub(crate) const MAX_RESOURCES: usize = 256;
/// Tenants counted apart; the rest share [`OTHER`].
pub(crate) const MAX_TENANTS: usize = 1024;
/// Where what does not fit is counted.
pub(crate) const OTHER: &str = "_other";

/// What the layers note of one request for the dashboard.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// The admission lane (the model or API), once known.
    pub lane: Option<Arc<str>>,
    /// Attempts sent upstream (each cleared the limiter).
    pub attempts: u32,
    /// Attempts the upstream answered 429.
    pub throttled: u32,
    /// Attempts sent again.
    pub retries: u32,
    /// Time in the admission queue, once admitted.
    pub queue_wait: Option<Duration>,
}

/// Buckets of [`LogHist`]: a quarter power of two each, from 1 µs to
/// 2^28 µs (4.5 minutes, past the longest upstream timeout).
const BUCKETS: usize = 112;

/// Latencies in buckets of a quarter power of two (±9% around a
/// bucket's middle): enough to tell 40 ms from 50 ms in a dashboard, in
/// under 1 KiB however many requests it counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogHist(Box<[u64; BUCKETS]>);

impl Default for LogHist {
    fn default() -> Self {
        LogHist(Box::new([0; BUCKETS]))
    }
}

impl LogHist {
    fn bucket(d: Duration) -> usize {
        let us = d.as_micros().max(1) as f64;
        ((us.log2() * 4.0) as usize).min(BUCKETS - 1)
    }

    /// Counts one latency.
    pub(crate) fn record(&mut self, d: Duration) {
        self.0[Self::bucket(d)] += 1;
    }

    /// What was counted since `earlier` (a reading of the same totals).
    pub(crate) fn since(&self, earlier: &LogHist) -> LogHist {
        let mut out = LogHist::default();
        for (i, o) in out.0.iter_mut().enumerate() {
            *o = self.0[i].saturating_sub(earlier.0[i]);
        }
        out
    }

    /// How many latencies.
    pub(crate) fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The `q` quantile (0–1) in milliseconds, as the middle of its
    /// bucket; `None` when empty.
    pub(crate) fn quantile_ms(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        // The rank of the q-quantile, counted from 1.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(2f64.powf((i as f64 + 0.5) / 4.0) / 1e3);
            }
        }
        None
    }
}

/// One resource's totals since start.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResourceTotals {
    /// Requests answered.
    pub requests: u64,
    /// Attempts sent upstream.
    pub admitted: u64,
    /// Upstream 429s.
    pub throttled: u64,
    /// Retries.
    pub retries: u64,
    /// Answers of 429 or 5xx to the client.
    pub failed: u64,
    /// Request latencies, arrival to answer (a stream's head).
    pub latency: LogHist,
}

/// One tenant's totals since start.
#[derive(Clone, Debug, Default)]
pub(crate) struct TenantTotals {
    /// Requests answered.
    pub requests: u64,
    /// Requests admitted from the queue, and their summed wait.
    pub admitted: u64,
    pub queue_wait: Duration,
}

/// Every total, as one reading.
#[derive(Clone, Debug, Default)]
pub(crate) struct Totals {
    pub resources: HashMap<Box<str>, ResourceTotals, RandomState>,
    pub tenants: HashMap<Box<str>, TenantTotals, RandomState>,
}

/// The totals, shared by every request of one gateway.
#[derive(Debug, Default)]
pub(crate) struct Pulse {
    totals: Mutex<Totals>,
}

/// The entry of `key` in `map`, or of `other` once `max` keys are
/// counted: a count per name that callers cannot grow past `max + 1`.
/// A key already counted costs two lookups and no allocation.
pub(crate) fn slot<'a, T: Default>(
    map: &'a mut HashMap<Box<str>, T, RandomState>,
    key: &str,
    max: usize,
    other: &str,
) -> &'a mut T {
    if map.contains_key(key) {
        return map.get_mut(key).expect("present");
    }
    let key = if map.len() < max { key } else { other };
    map.entry(key.into()).or_default()
}

impl Pulse {
    /// Counts one answered request of `tenant` for `resource`.
    pub(crate) fn record(
        &self,
        resource: Option<&str>,
        tenant: Option<&str>,
        tally: &Tally,
        status: u16,
        elapsed: Duration,
    ) {
        let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = resource {
            let t = slot(&mut totals.resources, r, MAX_RESOURCES, OTHER);
            t.requests += 1;
            t.admitted += u64::from(tally.attempts);
            t.throttled += u64::from(tally.throttled);
            t.retries += u64::from(tally.retries);
            t.failed += u64::from(status == 429 || status >= 500);
            t.latency.record(elapsed);
        }
        if let Some(name) = tenant {
            let t = slot(&mut totals.tenants, name, MAX_TENANTS, OTHER);
            t.requests += 1;
            if let Some(w) = tally.queue_wait {
                t.admitted += 1;
                t.queue_wait += w;
            }
        }
    }

    /// A reading of every total.
    pub(crate) fn read(&self) -> Totals {
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_land_in_the_right_bucket() {
        let mut h = LogHist::default();
        assert_eq!(h.quantile_ms(0.5), None);
        for _ in 0..98 {
            h.record(Duration::from_millis(40));
        }
        h.record(Duration::from_millis(900));
        h.record(Duration::from_secs(3));
        let p50 = h.quantile_ms(0.5).unwrap();
        assert!((36.0..44.0).contains(&p50), "{p50}");
        let p99 = h.quantile_ms(0.99).unwrap();
        assert!((820.0..980.0).contains(&p99), "{p99}");
        let top = h.quantile_ms(1.0).unwrap();
        assert!((2700.0..3300.0).contains(&top), "{top}");
        // The difference of two readings counts what came between.
        let before = h.clone();
        h.record(Duration::from_millis(5));
        let d = h.since(&before);
        assert_eq!(d.count(), 1);
        let only = d.quantile_ms(0.5).unwrap();
        assert!((4.5..5.5).contains(&only), "{only}");
        // Zero and huge latencies stay in range.
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(100_000));
        assert_eq!(h.count(), 103);
    }

    #[test]
    fn keys_past_the_bound_are_counted_together() {
        let pulse = Pulse::default();
        let tally = Tally {
            attempts: 2,
            throttled: 1,
            retries: 1,
            queue_wait: Some(Duration::from_millis(10)),
            ..Tally::default()
        };
        for i in 0..MAX_RESOURCES + 10 {
            let r = format!("m{i}");
            pulse.record(
                Some(&r),
                Some("acme"),
                &tally,
                200,
                Duration::from_millis(1),
            );
        }
        pulse.record(
            Some("m0"),
            None,
            &Tally::default(),
            503,
            Duration::from_millis(1),
        );
        let t = pulse.read();
        assert_eq!(t.resources.len(), MAX_RESOURCES + 1);
        assert_eq!(t.resources[OTHER].requests, 10);
        let m0 = &t.resources["m0"];
        assert_eq!(
            (
                m0.requests,
                m0.admitted,
                m0.throttled,
                m0.retries,
                m0.failed
            ),
            (2, 2, 1, 1, 1)
        );
        let acme = &t.tenants["acme"];
        assert_eq!(acme.requests, MAX_RESOURCES as u64 + 10);
        assert_eq!(
            acme.queue_wait,
            Duration::from_millis(10) * acme.admitted as u32
        );
    }
}
