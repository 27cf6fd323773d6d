//! The live view of a running swarm: on a terminal, a table redrawn in
//! place every second (plain ANSI: cursor up, clear to the end); anywhere
//! else, a plain line every few seconds.

use std::collections::{BTreeMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::time::Duration;

use sluice_sim::Stats;
use sluice_sim::swarm::{Mode, Progress, TargetProgress};

use crate::summary::ms;

/// Seconds over which admitted/s is averaged.
const RATE_WINDOW_S: f64 = 3.0;
/// How often a plain line is written when not on a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// What the gateway says about its queues (through Sluice only).
#[derive(Debug, Clone, Default)]
pub struct GatewayView {
    /// Requests in the admission queue.
    pub queued: u64,
    /// Requests waiting in the limiter, by swarm target name.
    pub waiting: BTreeMap<String, u64>,
}

/// One sample of the cumulative counters, for rates.
#[derive(Debug, Clone)]
struct Sample {
    at_s: f64,
    admitted: BTreeMap<String, u64>,
    finished: BTreeMap<String, (u64, f64)>,
}

/// The view; writes to stdout, or to stderr when stdout carries JSON.
pub struct Live {
    out: Box<dyn Write + Send>,
    tty: bool,
    title: String,
    mode: Mode,
    /// Each target's limit in requests per second.
    limits: BTreeMap<String, f64>,
    drawn: usize,
    last_plain: Option<f64>,
    samples: VecDeque<Sample>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("title", &self.title)
            .finish_non_exhaustive()
    }
}

impl Live {
    pub fn new(to_stderr: bool, title: String, mode: Mode, limits: BTreeMap<String, f64>) -> Self {
        let (out, tty): (Box<dyn Write + Send>, bool) = if to_stderr {
            (Box::new(std::io::stderr()), std::io::stderr().is_terminal())
        } else {
            (Box::new(std::io::stdout()), std::io::stdout().is_terminal())
        };
        Live {
            out,
            tty,
            title,
            mode,
            limits,
            drawn: 0,
            last_plain: None,
            samples: VecDeque::new(),
        }
    }

    /// Takes a new sample and shows it.
    pub fn update(&mut self, p: &Progress, stats: &Stats, gw: Option<&GatewayView>) {
        let admitted = p
            .targets
            .iter()
            .map(|t| (t.name.clone(), counted(stats, t)))
            .collect();
        let finished = p
            .targets
            .iter()
            .map(|t| (t.name.clone(), (t.ok + t.failed, t.latency_ms_sum)))
            .collect();
        self.samples.push_back(Sample {
            at_s: p.elapsed_s,
            admitted,
            finished,
        });
        while self
            .samples
            .front()
            .is_some_and(|s| p.elapsed_s - s.at_s > RATE_WINDOW_S + 0.5)
        {
            self.samples.pop_front();
        }
        if self.tty {
            let frame = self.frame(p, stats, gw);
            let mut buf = String::new();
            if self.drawn > 0 {
                // Back to the first line of the last frame, clear below.
                buf.push_str(&format!("\x1b[{}F\x1b[J", self.drawn));
            }
            buf.push_str(&frame);
            self.drawn = frame.lines().count();
            let _ = self.out.write_all(buf.as_bytes());
        } else if self
            .last_plain
            .is_none_or(|t| p.elapsed_s - t >= PLAIN_EVERY.as_secs_f64())
        {
            self.last_plain = Some(p.elapsed_s);
            let line = self.plain(p, stats, gw);
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    /// Rate of `f` per second over the window, per target.
    fn rate(&self, name: &str) -> f64 {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return 0.0;
        };
        let span = last.at_s - first.at_s;
        if span <= 0.0 {
            return 0.0;
        }
        let get = |s: &Sample| s.admitted.get(name).copied().unwrap_or(0);
        get(last).saturating_sub(get(first)) as f64 / span
    }

    /// Mean latency of the calls finished within the window.
    fn recent_latency(&self, name: &str) -> Option<f64> {
        let (first, last) = (self.samples.front()?, self.samples.back()?);
        let get = |s: &Sample| s.finished.get(name).copied().unwrap_or((0, 0.0));
        let ((n0, l0), (n1, l1)) = (get(first), get(last));
        (n1 > n0).then(|| (l1 - l0) / (n1 - n0) as f64)
    }

    fn frame(&self, p: &Progress, stats: &Stats, gw: Option<&GatewayView>) -> String {
        let width = 30usize;
        let done = ((p.elapsed_s / p.duration_s).clamp(0.0, 1.0) * width as f64) as usize;
        let (ok, failed, in_flight) = totals(&p.targets);
        let mut s = format!(
            "{}  [{}{}] {:>3.0}s of {:.0}s\ncalls ok {ok}  failed {failed}  in flight {in_flight}",
            self.title,
            "#".repeat(done),
            ".".repeat(width - done),
            p.elapsed_s.min(p.duration_s),
            p.duration_s,
        );
        let waiting_label = match (self.mode, gw) {
            (Mode::Gateway, Some(g)) => {
                s.push_str(&format!("  admission queue {}", g.queued));
                "waiting"
            }
            _ => "backoff",
        };
        s.push('\n');
        s.push_str(&format!(
            "{:<34}{:>8}{:>12}{:>7}{:>11}{:>9}{:>11}{:>8}\n",
            "resource",
            "limit/s",
            "admitted/s",
            "used",
            "in flight",
            waiting_label,
            "latency",
            "429s"
        ));
        let mut sum = (0.0, 0.0, 0u64);
        for t in &p.targets {
            let limit = self.limits.get(&t.name).copied().unwrap_or(0.0);
            let rate = self.rate(&t.name);
            let c = if t.kind == "api" {
                stats.api(&t.name)
            } else {
                stats.model(&t.name)
            };
            let waiting = match (self.mode, gw) {
                (Mode::Gateway, Some(g)) => g.waiting.get(&t.name).copied().unwrap_or(0),
                _ => t.backing_off,
            };
            let used = if limit > 0.0 {
                rate / limit * 100.0
            } else {
                0.0
            };
            let latency = self.recent_latency(&t.name).map_or_else(|| "-".into(), ms);
            s.push_str(&format!(
                "{:<34}{limit:>8.1}{rate:>12.1}{used:>6.0}%{:>11}{waiting:>9}{latency:>11}{:>8}\n",
                format!("{} {}", t.kind, t.name),
                t.in_flight,
                c.rate_limited,
            ));
            sum = (sum.0 + limit, sum.1 + rate, sum.2 + c.rate_limited);
        }
        let used = if sum.0 > 0.0 {
            sum.1 / sum.0 * 100.0
        } else {
            0.0
        };
        s.push_str(&format!(
            "{:<34}{:>8.1}{:>12.1}{used:>6.0}%{:>11}{:>9}{:>11}{:>8}\n",
            "all", sum.0, sum.1, in_flight, "", "", sum.2
        ));
        s
    }

    fn plain(&self, p: &Progress, stats: &Stats, gw: Option<&GatewayView>) -> String {
        let (ok, failed, in_flight) = totals(&p.targets);
        let limit: f64 = p
            .targets
            .iter()
            .filter_map(|t| self.limits.get(&t.name))
            .sum();
        let rate: f64 = p.targets.iter().map(|t| self.rate(&t.name)).sum();
        let throttled: u64 = stats
            .models
            .values()
            .chain(stats.apis.values())
            .map(|c| c.rate_limited)
            .sum();
        let queue = gw.map_or_else(String::new, |g| format!("  admission queue {}", g.queued));
        format!(
            "{} {:>3.0}s/{:.0}s  calls ok {ok} failed {failed} in flight {in_flight}{queue}  admitted {rate:.1}/s of {limit:.1}/s  upstream 429s {throttled}",
            self.title,
            p.elapsed_s.min(p.duration_s),
            p.duration_s,
        )
    }
}

/// The sim's count of admitted requests for a swarm target.
fn counted(stats: &Stats, t: &TargetProgress) -> u64 {
    if t.kind == "api" {
        stats.api(&t.name).admitted
    } else {
        stats.model(&t.name).admitted
    }
}

fn totals(targets: &[TargetProgress]) -> (u64, u64, u64) {
    targets.iter().fold((0, 0, 0), |(o, f, i), t| {
        (o + t.ok, f + t.failed, i + t.in_flight)
    })
}
