//! (e) What OpenTelemetry export costs a request: the same open-loop
//! stream through two in-process gateways in front of one sim, one with
//! `[otel]` off, one exporting every request (sampling ratio 1, OTLP
//! HTTP/protobuf) to a local receiver that answers without decoding (a
//! collector's work is not the gateway's). The sides alternate in rounds
//! so that both see the same machine.
//!
//! CPU per request is the CPU time of the gateways' own threads (where
//! the exporter's task runs too; `stack::gateway_cpu`, 0 where the
//! kernel does not say) over the requests sent; on a shared machine it
//! moves far less than wall-clock latency does, and "on − off" is the
//! export's share.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use sluice_gateway::config::{Config, OtelSettings, OtlpProtocol};
use sluice_sim::SimConfig;
use sluice_sim::otlp::Receiver;
use sluice_sim::swarm::Percentiles;

use super::open_loop::{self, Measured};
use super::{GatewayArgs, chat, client, limits_off, note};
use crate::stack::Stack;

/// Rounds of (off, on); each side runs `duration / ROUNDS` per round.
const ROUNDS: u32 = 4;

/// (e).
#[derive(Debug, Serialize)]
pub struct OtelPart {
    pub rate_per_second: f64,
    pub duration_s: f64,
    pub off: Side,
    pub on: Side,
    /// on − off at the median, microseconds.
    pub added_p50_us: f64,
    /// on − off, CPU microseconds per request.
    pub added_cpu_us_per_request: f64,
    /// Exports the receiver took (batches of up to 512 spans).
    pub exports: u64,
}

/// One side of (e).
#[derive(Debug, Serialize)]
pub struct Side {
    #[serde(flatten)]
    pub percentiles: Percentiles,
    pub sent: u64,
    pub errors: u64,
    /// The gateway threads' CPU time per request sent, microseconds.
    pub cpu_us_per_request: f64,
}

struct Totals {
    latency: Histogram<u64>,
    sent: u64,
    errors: u64,
    cpu: Duration,
}

impl Totals {
    fn new() -> Totals {
        Totals {
            latency: Histogram::new(3).expect("3 significant figures"),
            sent: 0,
            errors: 0,
            cpu: Duration::ZERO,
        }
    }

    fn add(&mut self, m: &Measured, cpu: Duration) {
        let _ = self.latency.add(&m.latency);
        self.sent += m.sent;
        self.errors += m.errors + m.dropped;
        self.cpu += cpu;
    }

    fn side(&self) -> Side {
        Side {
            percentiles: Percentiles::of(&self.latency),
            sent: self.sent,
            errors: self.errors,
            cpu_us_per_request: self.cpu.as_secs_f64() * 1e6 / self.sent.max(1) as f64,
        }
    }
}

/// `[otel]` on, every request sampled, to `endpoint`.
fn exporting(endpoint: String) -> impl FnOnce(&mut Config) {
    move |c| {
        limits_off(c);
        c.otel = Some(OtelSettings {
            endpoint,
            protocol: OtlpProtocol::HttpProtobuf,
            headers: Default::default(),
            service_name: "sluice-bench".into(),
            sampling_ratio: 1.0,
            batch_size: 512,
            batch_interval_ms: 1_000,
            queue_size: 65_536,
            timeout_ms: 10_000,
        });
    }
}

pub(super) async fn run(args: &GatewayArgs) -> Result<OtelPart, String> {
    let receiver = Receiver::start(false).await.map_err(|e| e.to_string())?;
    let off = Stack::start(SimConfig::unlimited(), limits_off).await?;
    let on = Stack::start(SimConfig::unlimited(), exporting(receiver.url())).await?;
    let http = client(args.connections);
    let (off_url, on_url) = (off.gateway_url(), on.gateway_url());
    for base in [&off_url, &on_url] {
        for _ in 0..50 {
            if !open_loop::send(chat(&http, base, false)()).await {
                return Err(format!("{base} does not answer a chat completion"));
            }
        }
    }
    let each = (args.duration / ROUNDS).max(Duration::from_millis(500));
    let max_outstanding = (args.rate as usize).max(64) * 10;
    note(
        args.json,
        &format!(
            "(e) OpenTelemetry export off and on, {ROUNDS} rounds of {:.1} s each at {} req/s",
            each.as_secs_f64(),
            args.rate
        ),
    );
    let (mut t_off, mut t_on) = (Totals::new(), Totals::new());
    for _ in 0..ROUNDS {
        for (base, totals) in [(&off_url, &mut t_off), (&on_url, &mut t_on)] {
            let before = crate::stack::gateway_cpu();
            let m =
                open_loop::run(args.rate, each, max_outstanding, chat(&http, base, false)).await;
            let spent = crate::stack::gateway_cpu()
                .zip(before)
                .map(|(after, before)| after.saturating_sub(before));
            totals.add(&m, spent.unwrap_or_default());
        }
    }
    // The last batch goes out before the count is read.
    on.stop().await;
    off.stop().await;
    let (off, on) = (t_off.side(), t_on.side());
    Ok(OtelPart {
        rate_per_second: args.rate,
        duration_s: (each * ROUNDS).as_secs_f64(),
        added_p50_us: (on.percentiles.p50_ms - off.percentiles.p50_ms) * 1e3,
        added_cpu_us_per_request: on.cpu_us_per_request - off.cpu_us_per_request,
        exports: receiver.exports().0,
        off,
        on,
    })
}

impl OtelPart {
    pub(super) fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "(e) OpenTelemetry export, open loop at {} req/s, {:.0} s each side in alternating rounds:\n    [otel] off vs on (every request sampled, OTLP HTTP/protobuf to a local receiver)",
            self.rate_per_second, self.duration_s
        );
        let _ = writeln!(
            s,
            "{:<10}{:>11}{:>11}{:>9}{:>16}",
            "", "p50", "p99", "errors", "CPU/request"
        );
        for (name, side) in [("otel off", &self.off), ("otel on", &self.on)] {
            let _ = writeln!(
                s,
                "{name:<10}{:>11}{:>11}{:>9}{:>13.1} µs",
                crate::summary::ms(side.percentiles.p50_ms),
                crate::summary::ms(side.percentiles.p99_ms),
                side.errors,
                side.cpu_us_per_request
            );
        }
        let _ = writeln!(
            s,
            "{:<10}{:>9.1} µs at p50, {:.1} µs CPU per request; {} exports received\n",
            "added", self.added_p50_us, self.added_cpu_us_per_request, self.exports
        );
        s
    }
}
