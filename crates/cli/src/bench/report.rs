//! The bench's figures, as a table and as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use sluice_sim::swarm::Percentiles;

use super::closed_loop::Throughput;
use super::open_loop::Measured;
use crate::summary::{RunSummary, ms};

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The gateway (a) and (b) went through, when not the in-process one.
    pub target: Option<String>,
    /// The Redis the in-process gateway decided its limits in (`--redis`).
    pub redis: Option<String>,
    /// CPUs of this machine, load generator included.
    pub cpus: usize,
    pub latency: LatencyPart,
    /// (a) in front of a slow upstream.
    pub slow: SlowPart,
    pub throughput: ThroughputPart,
    pub swarm: SwarmPart,
    /// (d), for the in-process gateway.
    pub keys: Option<KeysPart>,
    /// (e).
    pub otel: super::otel::OtelPart,
    /// (f).
    pub limited: super::limited::LimitedPart,
}

/// (d): the same stream through a gateway with keys, ledger and budgets
/// off, and through one with all three on, as a key whose tenant has
/// budgets.
#[derive(Debug, Serialize)]
pub struct KeysPart {
    pub off: StreamLatency,
    pub on: StreamLatency,
    /// on − off, percentile by percentile.
    pub added: Added,
    pub cpu_off: Option<Cpu>,
    pub cpu_on: Option<Cpu>,
    /// The same with the threads that write for the gateway (the
    /// ledger's writer, SQLite's connections): `[off, on]`.
    pub with_writers: [Option<Cpu>; 2],
}

impl KeysPart {
    pub fn new(
        off: &Measured,
        on: &Measured,
        cpu: [Option<Cpu>; 2],
        writers: [Option<Cpu>; 2],
    ) -> Self {
        let (off, on) = (StreamLatency::new(off), StreamLatency::new(on));
        KeysPart {
            added: Added::between(&off, &on),
            off,
            on,
            cpu_off: cpu[0],
            cpu_on: cpu[1],
            with_writers: writers,
        }
    }

    fn table(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n(d) keys, ledger and budgets: (a)'s stream through a gateway with all three off, then\n    with all three on, as a key with a request limit whose tenant has money, token and\n    request budgets"
        );
        header_row(s);
        latency_row(s, "all off", &self.off);
        latency_row(s, "all on", &self.on);
        added_row(s, "added", &self.added);
        if let (Some(off), Some(on)) = (self.cpu_off, self.cpu_on) {
            let _ = writeln!(
                s,
                "gateway CPU per request: {} all off, {} all on ({})",
                us(off.us_per_request),
                us(on.us_per_request),
                signed_us(on.us_per_request - off.us_per_request),
            );
        }
        if let [Some(off), Some(on)] = self.with_writers {
            let _ = writeln!(
                s,
                "  with its ledger writer's and SQLite's threads: {} all off, {} all on ({})",
                us(off.us_per_request),
                us(on.us_per_request),
                signed_us(on.us_per_request - off.us_per_request),
            );
        }
    }
}

/// (a).
#[derive(Debug, Serialize)]
pub struct LatencyPart {
    pub rate_per_second: f64,
    pub duration_s: f64,
    pub direct: StreamLatency,
    /// Through the bare hop (`bare.rs`): what any proxy costs here.
    pub bare_hop: StreamLatency,
    pub gateway: StreamLatency,
    /// gateway − direct, percentile by percentile.
    pub added: Added,
    /// bare hop − direct.
    pub bare_added: Added,
    /// Through the gateway, every request a cache hit.
    pub cache_hit: StreamLatency,
    /// Through the gateway, every request a streamed completion.
    pub streamed: StreamLatency,
    /// The in-process gateway's CPU time per request at this rate, not
    /// saturated (none for a `--target`); (b) has the saturated figure.
    pub cpu: Option<CpuPart>,
    /// The bare hop's CPU time per request at this rate.
    pub bare_cpu: Option<Cpu>,
}

/// The gateway's CPU time per request, non-streamed and streamed.
#[derive(Debug, Serialize)]
pub struct CpuPart {
    pub non_streamed: Cpu,
    pub streamed: Cpu,
}

impl CpuPart {
    /// Both figures, when both were read from the in-process gateway
    /// (an external gateway's threads, `--target`, are not ours to read).
    pub fn of(
        args: &super::GatewayArgs,
        non_streamed: Option<Cpu>,
        streamed: Option<Cpu>,
    ) -> Option<CpuPart> {
        match (args.target.is_none(), non_streamed, streamed) {
            (true, Some(non_streamed), Some(streamed)) => Some(CpuPart {
                non_streamed,
                streamed,
            }),
            _ => None,
        }
    }
}

/// The gateway's CPU time over one stream of (a) or (b).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cpu {
    /// CPU seconds of the gateway's threads, user and system.
    pub seconds: f64,
    /// Requests of the stream.
    pub requests: u64,
    /// seconds ÷ requests, in µs.
    pub us_per_request: f64,
}

impl Cpu {
    /// The CPU time between two readings of [`crate::stack::gateway_cpu`]
    /// over `stream`'s requests.
    pub fn between(
        before: Option<Duration>,
        after: Option<Duration>,
        stream: &Measured,
    ) -> Option<Cpu> {
        Cpu::over(before, after, stream.sent)
    }

    /// The CPU time between two readings of [`crate::stack::gateway_cpu`]
    /// over `requests`.
    pub fn over(before: Option<Duration>, after: Option<Duration>, requests: u64) -> Option<Cpu> {
        let spent = after?.checked_sub(before?)?;
        Some(Cpu {
            seconds: spent.as_secs_f64(),
            requests,
            us_per_request: spent.as_secs_f64() * 1e6 / requests.max(1) as f64,
        })
    }
}

/// (a) in front of a slow upstream.
#[derive(Debug, Serialize)]
pub struct SlowPart {
    pub rate_per_second: f64,
    /// How long the upstream takes to answer.
    pub upstream_ms: f64,
    pub duration_s: f64,
    pub direct: StreamLatency,
    /// Through the bare hop (`bare.rs`).
    pub bare_hop: StreamLatency,
    pub gateway: StreamLatency,
    /// gateway − direct, percentile by percentile.
    pub added: Added,
    /// bare hop − direct.
    pub bare_added: Added,
    /// The in-process gateway's CPU time per request at this rate (none
    /// for a `--target`): the request's work done cold.
    pub cpu: Option<Cpu>,
    /// The bare hop's.
    pub bare_cpu: Option<Cpu>,
}

impl SlowPart {
    pub fn new(
        rate: f64,
        upstream: Duration,
        duration: Duration,
        direct: &Measured,
        bare: &Measured,
        gateway: &Measured,
    ) -> Self {
        let (d, b, g) = (
            StreamLatency::new(direct),
            StreamLatency::new(bare),
            StreamLatency::new(gateway),
        );
        SlowPart {
            rate_per_second: rate,
            upstream_ms: upstream.as_secs_f64() * 1e3,
            duration_s: duration.as_secs_f64(),
            added: Added::between(&d, &g),
            bare_added: Added::between(&d, &b),
            direct: d,
            bare_hop: b,
            gateway: g,
            cpu: None,
            bare_cpu: None,
        }
    }
}

/// One stream of (a).
#[derive(Debug, Serialize)]
pub struct StreamLatency {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    pub sent: u64,
    pub errors: u64,
    /// Not sent: too many already under way (each counted at the
    /// stream's length).
    pub dropped: u64,
}

#[derive(Debug, Serialize)]
pub struct Added {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

impl Added {
    fn between(direct: &StreamLatency, gateway: &StreamLatency) -> Self {
        let (d, g) = (&direct.percentiles, &gateway.percentiles);
        Added {
            p50_ms: g.p50_ms - d.p50_ms,
            p99_ms: g.p99_ms - d.p99_ms,
            p999_ms: g.p999_ms - d.p999_ms,
        }
    }
}

impl StreamLatency {
    fn new(m: &Measured) -> Self {
        StreamLatency {
            percentiles: Percentiles::of(&m.latency),
            sent: m.sent,
            errors: m.errors,
            dropped: m.dropped,
        }
    }
}

impl LatencyPart {
    pub fn new(
        rate: f64,
        duration: Duration,
        direct: &Measured,
        bare: &Measured,
        gateway: &Measured,
        cached: &Measured,
        streamed: &Measured,
    ) -> Self {
        let (d, b, g) = (
            StreamLatency::new(direct),
            StreamLatency::new(bare),
            StreamLatency::new(gateway),
        );
        LatencyPart {
            rate_per_second: rate,
            duration_s: duration.as_secs_f64(),
            added: Added::between(&d, &g),
            bare_added: Added::between(&d, &b),
            direct: d,
            bare_hop: b,
            gateway: g,
            cache_hit: StreamLatency::new(cached),
            streamed: StreamLatency::new(streamed),
            cpu: None,
            bare_cpu: None,
        }
    }
}

/// (b).
#[derive(Debug, Serialize)]
pub struct ThroughputPart {
    pub connections: usize,
    pub duration_s: f64,
    pub direct: Throughput,
    /// Through the bare hop (`bare.rs`).
    pub bare_hop: Throughput,
    pub gateway: Throughput,
    /// gateway ÷ direct.
    pub ratio: f64,
    /// bare hop ÷ direct.
    pub bare_ratio: f64,
    /// Through the gateway, every request a streamed completion.
    pub streamed: Throughput,
    /// Through the gateway, every request a cache hit.
    pub cache_hit: Throughput,
    /// The in-process gateway's CPU time ÷ the requests it answered,
    /// saturated (none for a `--target`): CPU per proxied request as
    /// issue 12 defines it.
    pub cpu: Option<CpuPart>,
    /// The same with the threads that write for the gateway (the usage
    /// ledger's writer, SQLite's connections): the whole gateway's CPU.
    pub cpu_with_writers: Option<CpuPart>,
    /// The bare hop's CPU time ÷ the requests it answered, saturated.
    pub bare_cpu: Option<Cpu>,
    /// Through the gateway, the question as an Anthropic Messages client
    /// asks it of the same OpenAI-format model: translated both ways.
    pub translated: Option<Throughput>,
    /// The same, streamed.
    pub translated_streamed: Option<Throughput>,
    /// The gateway's CPU per translated request, beside [`Self::cpu`].
    pub cpu_translated: Option<CpuPart>,
}

impl ThroughputPart {
    pub fn new(
        connections: usize,
        each: Duration,
        direct: Throughput,
        bare_hop: Throughput,
        gateway: Throughput,
        streamed: Throughput,
        cache_hit: Throughput,
    ) -> Self {
        let of_direct = |t: &Throughput| {
            if direct.requests_per_second > 0.0 {
                t.requests_per_second / direct.requests_per_second
            } else {
                0.0
            }
        };
        ThroughputPart {
            connections,
            duration_s: each.as_secs_f64(),
            ratio: of_direct(&gateway),
            bare_ratio: of_direct(&bare_hop),
            direct,
            bare_hop,
            gateway,
            streamed,
            cache_hit,
            cpu: None,
            cpu_with_writers: None,
            bare_cpu: None,
            translated: None,
            translated_streamed: None,
            cpu_translated: None,
        }
    }
}

/// (c).
#[derive(Debug, Serialize)]
pub struct SwarmPart {
    pub model: String,
    pub limit_per_second: f64,
    pub burst: u64,
    pub agents: usize,
    /// What the agents would send without any limit.
    pub offered_per_second: f64,
    #[serde(flatten)]
    pub run: RunSummary,
}

impl Report {
    pub fn table(&self) -> String {
        let mut s = String::new();
        let l = &self.latency;
        let via = match (&self.target, &self.redis) {
            (Some(target), _) => target.clone(),
            (None, Some(redis)) => format!("the in-process gateway, [redis] at {redis}"),
            (None, None) => "the in-process gateway".to_owned(),
        };
        let _ = writeln!(
            s,
            "sluice bench gateway: loopback, {} CPUs shared by the sim, the gateway and the load\n",
            self.cpus
        );
        let _ = writeln!(
            s,
            "(a) latency, open loop at {} req/s for {:.0} s each, from each request's due time\n    (coordinated omission corrected), limits off; gateway: {via}",
            l.rate_per_second, l.duration_s
        );
        header_row(&mut s);
        for (name, r) in [
            ("direct", &l.direct),
            ("bare hop", &l.bare_hop),
            ("gateway", &l.gateway),
            ("cache hit", &l.cache_hit),
            ("streamed", &l.streamed),
        ] {
            latency_row(&mut s, name, r);
        }
        added_row(&mut s, "added", &l.added);
        added_row(&mut s, "hop adds", &l.bare_added);
        match &l.cpu {
            Some(c) => cpu_row(&mut s, &format!("at {} req/s", l.rate_per_second), c),
            None => {
                let _ = writeln!(
                    s,
                    "gateway CPU per request: not measured (not in this process)"
                );
            }
        }
        one_cpu_row(
            &mut s,
            "bare hop",
            &format!("at {} req/s", l.rate_per_second),
            l.bare_cpu,
        );
        let _ = writeln!(s, "{BARE_HOP}");
        let w = &self.slow;
        let _ = writeln!(
            s,
            "\n(a) the same at {} req/s for {:.0} s in front of an upstream that takes {:.0} ms",
            w.rate_per_second, w.duration_s, w.upstream_ms
        );
        header_row(&mut s);
        for (name, r) in [
            ("direct", &w.direct),
            ("bare hop", &w.bare_hop),
            ("gateway", &w.gateway),
        ] {
            latency_row(&mut s, name, r);
        }
        added_row(&mut s, "added", &w.added);
        added_row(&mut s, "hop adds", &w.bare_added);
        let at = format!("at {} req/s", w.rate_per_second);
        one_cpu_row(&mut s, "gateway", &at, w.cpu);
        one_cpu_row(&mut s, "bare hop", &at, w.bare_cpu);
        s.push('\n');

        let t = &self.throughput;
        let _ = writeln!(
            s,
            "(b) most requests/s, limits off, {} connections, {:.1} s each",
            t.connections, t.duration_s
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11.0} req/s  ({} errors)",
            "direct", t.direct.requests_per_second, t.direct.errors
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11.0} req/s  ({} errors; {:.0}% of direct)",
            "bare hop",
            t.bare_hop.requests_per_second,
            t.bare_hop.errors,
            t.bare_ratio * 100.0
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11.0} req/s  ({} errors; {:.0}% of direct)",
            "gateway",
            t.gateway.requests_per_second,
            t.gateway.errors,
            t.ratio * 100.0
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11.0} req/s  ({} errors)",
            "streamed", t.streamed.requests_per_second, t.streamed.errors
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11.0} req/s  ({} errors)",
            "cache hit", t.cache_hit.requests_per_second, t.cache_hit.errors
        );
        if let Some(c) = &t.cpu {
            cpu_row(&mut s, "saturated", c);
        }
        if let Some(c) = &t.cpu_with_writers {
            cpu_line(&mut s, "  with its ledger writer's and SQLite's threads", c);
        }
        one_cpu_row(&mut s, "bare hop", "saturated", t.bare_cpu);
        for (name, r) in [
            ("messages", &t.translated),
            ("msg strm", &t.translated_streamed),
        ] {
            if let Some(r) = r {
                let _ = writeln!(
                    s,
                    "{name:<10}{:>11.0} req/s  ({} errors; Anthropic Messages client, translated)",
                    r.requests_per_second, r.errors
                );
            }
        }
        if let (Some(plain), Some(tr)) = (&t.cpu, &t.cpu_translated) {
            cpu_line(&mut s, "gateway CPU per translated request", tr);
            let _ = writeln!(
                s,
                "  translation adds {} non-streamed, {} streamed",
                signed_us(tr.non_streamed.us_per_request - plain.non_streamed.us_per_request),
                signed_us(tr.streamed.us_per_request - plain.streamed.us_per_request),
            );
        }
        s.push('\n');

        let w = &self.swarm;
        let r = &w.run;
        let _ = writeln!(
            s,
            "(c) swarm through the in-process gateway: {} agents offering {:.0} req/s to {} limited to {} req/s (burst {}) in the sim and the gateway (the same limits: no margin configured), {} equal-weight tenants, {:.0} s",
            w.agents,
            w.offered_per_second,
            w.model,
            w.limit_per_second,
            w.burst,
            r.tenants.len(),
            r.elapsed_s
        );
        let _ = writeln!(
            s,
            "goodput        {:.1}% of capacity ({} admitted of {:.0})",
            r.goodput.share * 100.0,
            r.goodput.admitted,
            r.goodput.capacity
        );
        let _ = writeln!(s, "upstream 429s  {}", r.upstream_429s);
        let tenants: Vec<String> = r
            .tenants
            .iter()
            .map(|t| format!("{} ({} agents) {}", t.name, t.agents, t.ok))
            .collect();
        let _ = writeln!(
            s,
            "fairness       {:.3} (Jain; calls ok: {})",
            r.fairness,
            tenants.join(", ")
        );
        if let Some(k) = &self.keys {
            k.table(&mut s);
        }
        s.push('\n');
        s.push_str(&self.otel.table());
        s.push_str(&self.limited.table());
        s
    }
}

fn header_row(s: &mut String) {
    let _ = writeln!(
        s,
        "{:<10}{:>11}{:>11}{:>11}{:>11}{:>9}",
        "", "p50", "p99", "p99.9", "max", "errors"
    );
}

fn latency_row(s: &mut String, name: &str, r: &StreamLatency) {
    let p = &r.percentiles;
    let _ = writeln!(
        s,
        "{name:<10}{:>11}{:>11}{:>11}{:>11}{:>9}",
        ms(p.p50_ms),
        ms(p.p99_ms),
        ms(p.p999_ms),
        ms(p.max_ms),
        r.errors + r.dropped
    );
}

/// What the bare hop is, under the first table that shows it.
const BARE_HOP: &str = "bare hop: the sim behind a hyper forwarder on the gateway's thread layout and nothing else\n    (`hop adds` is what any proxy costs here; the gateway's own work is `added` − `hop adds`)";

fn added_row(s: &mut String, name: &str, a: &Added) {
    let _ = writeln!(
        s,
        "{:<10}{:>11}{:>11}{:>11}",
        name,
        ms(a.p50_ms),
        ms(a.p99_ms),
        ms(a.p999_ms)
    );
}

/// The gateway's CPU per request `when` (at a rate, or saturated).
fn cpu_row(s: &mut String, when: &str, c: &CpuPart) {
    cpu_line(s, &format!("gateway CPU per request {when}"), c);
}

/// `lead`: CPU per request non-streamed and streamed.
fn cpu_line(s: &mut String, lead: &str, c: &CpuPart) {
    let (n, st) = (&c.non_streamed, &c.streamed);
    let _ = writeln!(
        s,
        "{lead}: {} non-streamed, {} streamed ({:.2} s ÷ {} and {:.2} s ÷ {} requests)",
        us(n.us_per_request),
        us(st.us_per_request),
        n.seconds,
        n.requests,
        st.seconds,
        st.requests,
    );
}

/// `who`'s CPU per request `when`, when read.
fn one_cpu_row(s: &mut String, who: &str, when: &str, c: Option<Cpu>) {
    if let Some(c) = c {
        let _ = writeln!(
            s,
            "{who} CPU per request {when}: {} ({:.2} s ÷ {} requests)",
            us(c.us_per_request),
            c.seconds,
            c.requests,
        );
    }
}

/// Microseconds, as the CPU figures are read.
fn us(v: f64) -> String {
    format!("{v:.0} µs")
}

/// A difference, its sign always shown: `+5 µs`, `-12 µs`.
fn signed_us(v: f64) -> String {
    format!("{v:+.0} µs")
}

#[cfg(test)]
mod tests {
    use super::signed_us;

    #[test]
    fn a_difference_shows_its_sign() {
        assert_eq!(signed_us(5.2), "+5 µs");
        assert_eq!(signed_us(-26.4), "-26 µs");
    }
}
