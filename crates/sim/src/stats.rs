//! What each simulated upstream saw: counters and a per-second histogram
//! of admitted requests, served by `GET /_sim/stats`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::faults::Fault;

/// Seconds of histogram kept at least (older ones are dropped).
const KEEP_SECONDS: u64 = 3_600;

/// A snapshot of everything the sim counted since start or the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Milliseconds since the sim started.
    pub uptime_ms: u64,
    /// Per model, by the name clients sent.
    pub models: BTreeMap<String, Counters>,
    /// Per SaaS API.
    pub apis: BTreeMap<String, Counters>,
}

impl Stats {
    /// One model's counters, zero if it was never called.
    pub fn model(&self, name: &str) -> Counters {
        self.models.get(name).cloned().unwrap_or_default()
    }

    /// One API's counters, zero if it was never called.
    pub fn api(&self, name: &str) -> Counters {
        self.apis.get(name).cloned().unwrap_or_default()
    }
}

/// Counters of one model or API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// The provider whose limits a model had (none for APIs and for
    /// models of no configured provider).
    pub provider: Option<String>,
    /// Requests that named this model or API.
    pub requests: u64,
    /// Requests that passed the quota (including those then failed by a
    /// fault): the ones the histogram counts.
    pub admitted: u64,
    /// 2xx answers, disconnects, malformed answers and hangs included.
    pub ok: u64,
    /// 429 answers.
    pub rate_limited: u64,
    /// 5xx answers.
    pub server_errors: u64,
    /// 4xx answers other than 429.
    pub client_errors: u64,
    /// Connections dropped mid-response on purpose.
    pub disconnects: u64,
    /// Requests made to hang.
    pub hangs: u64,
    /// Answers made malformed on purpose (200s with a broken body).
    #[serde(default)]
    pub malformed: u64,
    /// Prompt tokens of admitted requests answered 2xx.
    pub tokens_in: u64,
    /// Completion tokens of complete 2xx answers.
    pub tokens_out: u64,
    /// Admitted requests per second of uptime.
    pub admitted_per_second: PerSecond,
}

impl Counters {
    pub(crate) fn count(&mut self, status: u16, fault: Fault, tokens: (u64, u64)) {
        self.requests += 1;
        match status {
            200..=299 => self.ok += 1,
            429 => self.rate_limited += 1,
            500..=599 => self.server_errors += 1,
            400..=499 => self.client_errors += 1,
            _ => {}
        }
        match fault {
            Fault::Disconnect { .. } => self.disconnects += 1,
            Fault::Hang(_) => self.hangs += 1,
            Fault::Malformed(_) => self.malformed += 1,
            Fault::None | Fault::Error(_) => {}
        }
        if (200..=299).contains(&status) {
            self.tokens_in += tokens.0;
            if !matches!(fault, Fault::Disconnect { .. } | Fault::Malformed(_)) {
                self.tokens_out += tokens.1;
            }
        }
    }

    pub(crate) fn admit(&mut self, second: u64) {
        self.admitted += 1;
        self.admitted_per_second.add(second);
    }
}

/// Admitted requests per second: `counts[i]` is second
/// `first_second + i` of uptime. Keeps at least the last hour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerSecond {
    /// The uptime second of `counts[0]`.
    pub first_second: u64,
    /// Admitted requests in each second.
    pub counts: Vec<u64>,
}

impl PerSecond {
    fn add(&mut self, second: u64) {
        if self.counts.is_empty() {
            self.first_second = second;
        }
        let mut idx = second.saturating_sub(self.first_second);
        if idx >= 2 * KEEP_SECONDS {
            // Drop what is older than the hour before `second`.
            let shift = idx + 1 - KEEP_SECONDS;
            let len = self.counts.len() as u64;
            self.counts.drain(..shift.min(len) as usize);
            self.first_second += shift;
            idx = KEEP_SECONDS - 1;
        }
        let idx = idx as usize;
        if idx >= self.counts.len() {
            self.counts.resize(idx + 1, 0);
        }
        if let Some(c) = self.counts.get_mut(idx) {
            *c += 1;
        }
    }

    /// The busiest single second.
    pub fn max(&self) -> u64 {
        self.counts.iter().copied().max().unwrap_or(0)
    }

    /// The most admitted in any `seconds` consecutive seconds (at least 1).
    pub fn max_in_window(&self, seconds: usize) -> u64 {
        let w = seconds.max(1);
        if self.counts.len() <= w {
            return self.total();
        }
        self.counts
            .windows(w)
            .map(|s| s.iter().sum())
            .max()
            .unwrap_or(0)
    }

    /// All admitted requests in the histogram.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_fills_gaps_and_windows() {
        let mut h = PerSecond::default();
        for s in [5, 5, 7, 8, 8, 8] {
            h.add(s);
        }
        assert_eq!((h.first_second, h.counts.clone()), (5, vec![2, 0, 1, 3]));
        assert_eq!((h.max(), h.max_in_window(2), h.total()), (3, 4, 6));
    }

    #[test]
    fn histogram_is_bounded() {
        let mut h = PerSecond::default();
        h.add(0);
        h.add(10 * KEEP_SECONDS);
        assert!(h.counts.len() as u64 <= 2 * KEEP_SECONDS);
        assert_eq!(h.total(), 1);
        assert_eq!(
            h.first_second + h.counts.len() as u64 - 1,
            10 * KEEP_SECONDS
        );
    }
}
