//! The figures a run is judged by: how much of the upstreams' capacity
//! became useful work (goodput), and how evenly tenants shared it (Jain's
//! fairness index).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Limits, SimConfig};
use crate::stats::Stats;

/// Jain's fairness index of `shares`: `(Σx)² / (n · Σx²)`, 1 when every
/// share is equal, `1/n` when one takes everything. Nobody getting
/// anything is equal too: an empty or all-zero list scores 1.
pub fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    if shares.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

/// The most of `times` (sorted ascending) inside any half-open window
/// `[t, t + width)`: how a rate limit is checked against recorded start
/// times, whatever they are measured in (instants, microseconds).
pub fn most_in_window<T, W>(times: &[T], width: W) -> usize
where
    T: Copy + std::ops::Sub<Output = W>,
    W: PartialOrd,
{
    let mut best = 0;
    let mut lo = 0;
    for (hi, &t) in times.iter().enumerate() {
        while t - times[lo] >= width {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// Requests an upstream with `limits` can admit in `elapsed`: its rate
/// times the time plus the burst it starts with (its bucket is full).
/// `None` for an upstream without a request limit.
pub fn capacity(limits: &Limits, elapsed: Duration) -> Option<f64> {
    let (burst, rate) = limits.request_bucket()?;
    Some(rate * elapsed.as_secs_f64() + burst)
}

/// Admitted requests against capacity, for one upstream or summed over
/// several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// Requests the upstreams admitted (answered 2xx, no faults injected).
    pub admitted: u64,
    /// Requests they could have admitted: Σ (rate × time + burst).
    pub capacity: f64,
    /// Requests they refused with 429.
    pub rate_limited: u64,
}

impl Goodput {
    /// `admitted ÷ capacity`: 1.0 uses every request the limits allow.
    pub fn share(&self) -> f64 {
        if self.capacity > 0.0 {
            self.admitted as f64 / self.capacity
        } else {
            0.0
        }
    }

    fn add(&mut self, other: Goodput) {
        self.admitted += other.admitted;
        self.capacity += other.capacity;
        self.rate_limited += other.rate_limited;
    }
}

/// One upstream's goodput, by the name the sim counts it under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamGoodput {
    /// The model (as sent upstream, `gpt-4o-mini`) or API (`slack`).
    pub name: String,
    /// `model` or `api`.
    pub kind: String,
    /// Its figures.
    #[serde(flatten)]
    pub goodput: Goodput,
    /// Its request limit per second.
    pub limit_per_second: f64,
}

/// Goodput of every limited upstream that was called in `stats` (counters
/// reset at the start of a run that lasted `elapsed`), and their total.
/// Upstreams without a request limit have no capacity to share and are
/// left out.
pub fn goodput(
    stats: &Stats,
    config: &SimConfig,
    elapsed: Duration,
) -> (Goodput, Vec<UpstreamGoodput>) {
    let models = stats.models.iter().map(|(name, c)| {
        let provider = c.provider.as_deref().unwrap_or("");
        let limits = config.model_settings(name, provider).limits;
        (name, "model", limits, c)
    });
    let apis = stats.apis.iter().filter_map(|(name, c)| {
        let limits = config.apis.get(name)?.limits;
        Some((name, "api", limits, c))
    });
    let mut total = Goodput::default();
    let mut each = Vec::new();
    for (name, kind, limits, c) in models.chain(apis) {
        let Some(capacity) = capacity(&limits, elapsed) else {
            continue;
        };
        if c.requests == 0 {
            continue;
        }
        let g = Goodput {
            admitted: c.admitted,
            capacity,
            rate_limited: c.rate_limited,
        };
        total.add(g);
        each.push(UpstreamGoodput {
            name: name.clone(),
            kind: kind.to_owned(),
            goodput: g,
            limit_per_second: limits.request_bucket().map_or(0.0, |(_, r)| r),
        });
    }
    (total, each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Counters;

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_takes_all() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), 0.25);
        assert_eq!(jain(&[]), 1.0);
        assert_eq!(jain(&[0.0, 0.0]), 1.0);
        // (1+2+3)² / (3 · (1+4+9)) = 36/42
        assert!((jain(&[1.0, 2.0, 3.0]) - 36.0 / 42.0).abs() < 1e-12);
        // Scale does not matter.
        assert!((jain(&[10.0, 20.0, 30.0]) - jain(&[1.0, 2.0, 3.0])).abs() < 1e-12);
    }

    #[test]
    fn capacity_is_rate_times_time_plus_burst() {
        let ten_s = Duration::from_secs(10);
        assert_eq!(
            capacity(&Limits::per_second(3.0).burst(10), ten_s),
            Some(40.0)
        );
        // The burst defaults to the rate rounded up.
        assert_eq!(capacity(&Limits::per_second(2.5), ten_s), Some(28.0));
        assert_eq!(capacity(&Limits::unlimited(), ten_s), None);
    }

    #[test]
    fn goodput_sums_limited_upstreams_that_were_called() {
        let config = SimConfig::default();
        let counters = |provider: Option<&str>, requests, admitted, rate_limited| Counters {
            provider: provider.map(str::to_owned),
            requests,
            admitted,
            rate_limited,
            ..Counters::default()
        };
        let mut stats = Stats::default();
        // openai: 3/s burst 10 → 40 in 10 s; anthropic: 2/s burst 8 → 28.
        stats
            .models
            .insert("gpt-4o-mini".into(), counters(Some("openai"), 50, 38, 12));
        stats.models.insert(
            "claude-sonnet-4-5".into(),
            counters(Some("anthropic"), 28, 28, 0),
        );
        // Called but unlimited (no provider): no capacity to count.
        stats
            .models
            .insert("mystery".into(), counters(None, 5, 5, 0));
        // slack: 3/s burst 10 → 40; github not called.
        stats.apis.insert("slack".into(), counters(None, 20, 20, 0));
        stats.apis.insert("github".into(), counters(None, 0, 0, 0));
        let (total, each) = goodput(&stats, &config, Duration::from_secs(10));
        assert_eq!(total.admitted, 38 + 28 + 20);
        assert_eq!(total.capacity, 40.0 + 28.0 + 40.0);
        assert_eq!(total.rate_limited, 12);
        assert!((total.share() - 86.0 / 108.0).abs() < 1e-12);
        let names: Vec<&str> = each.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["claude-sonnet-4-5", "gpt-4o-mini", "slack"]);
        assert_eq!(each[1].goodput.share(), 38.0 / 40.0);
        assert_eq!(each[1].limit_per_second, 3.0);
        assert_eq!(Goodput::default().share(), 0.0);
    }
}
