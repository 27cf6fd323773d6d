//! A swarm run scored: what the agents saw plus what the upstreams
//! counted, and the side-by-side table of two runs.

use std::time::Duration;

use serde::Serialize;
use sluice_sim::swarm::{Goodput, Percentiles, SwarmReport, TenantProgress, UpstreamGoodput};
use sluice_sim::{SimConfig, Stats};

use crate::table::Table;

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// `direct` or `gateway`.
    pub mode: sluice_sim::swarm::Mode,
    /// Seconds from the sim's reset to its final count.
    pub elapsed_s: f64,
    /// 429s the upstreams answered (the sim's count).
    pub upstream_429s: u64,
    /// Requests the upstreams admitted against what their limits allow.
    pub goodput: GoodputSummary,
    /// Jain's index over the tenants' successful calls.
    pub fairness: f64,
    /// Latency of successful calls, retries and waits included.
    pub latency_ms: Percentiles,
    /// Time to finish a task (a call with its retries and waits), over
    /// every task that ended, given up or not.
    pub task_time_ms: Percentiles,
    /// Requests that did no work: 429s, 5xx, transport errors.
    pub wasted_calls: u64,
    /// Calls by outcome.
    pub calls: Calls,
    /// Per tenant.
    pub tenants: Vec<TenantProgress>,
    /// Per upstream.
    pub upstreams: Vec<UpstreamGoodput>,
}

/// [`Goodput`] with its share.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GoodputSummary {
    /// Requests admitted.
    pub admitted: u64,
    /// Σ (limit × time + burst).
    pub capacity: f64,
    /// admitted ÷ capacity.
    pub share: f64,
}

/// Calls by outcome.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Calls {
    /// Answered 2xx.
    pub ok: u64,
    /// Gave up.
    pub failed: u64,
    /// Under way at the end.
    pub unfinished: u64,
    /// Requests sent, retries included.
    pub attempts: u64,
}

impl RunSummary {
    /// Scores `report` with the sim's `stats`, counted over `elapsed`.
    pub fn new(report: SwarmReport, stats: &Stats, sim: &SimConfig, elapsed: Duration) -> Self {
        let (total, upstreams): (Goodput, _) = sluice_sim::swarm::goodput(stats, sim, elapsed);
        let upstream_429s = stats
            .models
            .values()
            .chain(stats.apis.values())
            .map(|c| c.rate_limited)
            .sum();
        RunSummary {
            mode: report.mode,
            elapsed_s: elapsed.as_secs_f64(),
            upstream_429s,
            goodput: GoodputSummary {
                admitted: total.admitted,
                capacity: total.capacity,
                share: total.share(),
            },
            fairness: report.fairness,
            latency_ms: report.latency,
            task_time_ms: report.task_time,
            wasted_calls: report.wasted_calls,
            calls: Calls {
                ok: report.ok,
                failed: report.failed,
                unfinished: report.unfinished,
                attempts: report.attempts,
            },
            tenants: report.tenants,
            upstreams,
        }
    }
}

/// `1234 ms` as `1.23 s`, short ones in milliseconds.
pub fn ms(v: f64) -> String {
    if v >= 1_000.0 {
        format!("{:.2} s", v / 1_000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// Two runs side by side, one line per figure.
pub fn side_by_side(a: &RunSummary, b: &RunSummary, titles: (&str, &str)) -> String {
    let mut rows: Vec<(String, String, String)> = vec![
        // What an agent builder feels first: tasks done or given up, and
        // how long a task takes, failures included.
        row("tasks finished", a, b, |r| r.calls.ok.to_string()),
        row("tasks given up after retries", a, b, |r| {
            r.calls.failed.to_string()
        }),
        row("time per task p50 (every task)", a, b, |r| {
            ms(r.task_time_ms.p50_ms)
        }),
        row("time per task p99 (every task)", a, b, |r| {
            ms(r.task_time_ms.p99_ms)
        }),
        row("upstream 429s", a, b, |r| r.upstream_429s.to_string()),
        row("goodput, share of capacity", a, b, |r| {
            format!("{:.1}%", r.goodput.share * 100.0)
        }),
        row("  admitted / capacity", a, b, |r| {
            format!("{} / {:.0}", r.goodput.admitted, r.goodput.capacity)
        }),
        row(
            &format!("fairness (Jain, {} tenants)", a.tenants.len()),
            a,
            b,
            |r| format!("{:.3}", r.fairness),
        ),
        row("latency p50, successful calls only", a, b, |r| {
            ms(r.latency_ms.p50_ms)
        }),
        row("latency p99, successful calls only", a, b, |r| {
            ms(r.latency_ms.p99_ms)
        }),
        row("wasted calls", a, b, |r| r.wasted_calls.to_string()),
        row("tasks unfinished at the end", a, b, |r| {
            r.calls.unfinished.to_string()
        }),
    ];
    for (i, t) in a.tenants.iter().enumerate() {
        let label = format!("  {} ({} agents), calls ok", t.name, t.agents);
        let get = |r: &RunSummary| r.tenants.get(i).map_or(0, |t| t.ok).to_string();
        rows.push((label, get(a), get(b)));
    }
    let mut t = Table::new(["", titles.0, titles.1]).right([1, 2]);
    for (label, x, y) in rows {
        t.row([label, x, y]);
    }
    t.render()
}

fn row(
    label: &str,
    a: &RunSummary,
    b: &RunSummary,
    f: impl Fn(&RunSummary) -> String,
) -> (String, String, String) {
    (label.to_owned(), f(a), f(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_read_well() {
        assert_eq!(ms(0.412), "0.41 ms");
        assert_eq!(ms(42.4), "42 ms");
        assert_eq!(ms(1_234.0), "1.23 s");
    }

    #[test]
    fn indented_labels_keep_their_indent() {
        let mut t = Table::new(["", "a"]).right([1]);
        t.row(["total", "10"]).row(["  part", "4"]);
        assert_eq!(t.render(), "         a\ntotal   10\n  part   4\n");
    }
}
