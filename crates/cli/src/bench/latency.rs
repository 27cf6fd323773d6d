//! (a) Added latency at `--rate`: the same open-loop stream straight to
//! the sim, through the bare hop, through the gateway, streamed through
//! the gateway, and answered by the gateway's cache; the gateway's CPU
//! time ÷ requests for the non-streamed and the streamed stream, and the
//! bare hop's.

use super::gateway::Ends;
use std::time::Duration;

use super::report::{Cpu, CpuPart, LatencyPart};
use super::requests::{cached_chat, chat, streamed_chat};
use super::{GatewayArgs, note, open_loop};
use crate::stack::{bare_cpu, gateway_cpu};

/// (a) against the sim and the gateway of `ends`, both warm.
pub(super) async fn run(args: &GatewayArgs, ends: Ends<'_>, max_outstanding: usize) -> LatencyPart {
    note(
        args.json,
        &format!(
            "(a) open loop at {} req/s for {:.0} s, direct",
            args.rate,
            args.duration.as_secs_f64()
        ),
    );
    let (rate, duration, n) = (args.rate, args.duration, max_outstanding);
    let make = chat(ends.direct_client, ends.sim, true);
    let (direct, _) = stream(rate, duration, n, no_cpu, make).await;
    note(args.json, "(a) the same through a bare hop");
    let make = chat(ends.bare_client, ends.bare, true);
    let (bare, bare_cpu) = stream(rate, duration, n, bare_cpu, make).await;
    note(args.json, "(a) the same through the gateway");
    let make = chat(ends.gateway_client, ends.gateway, false);
    let (through, cpu) = stream(rate, duration, n, gateway_cpu, make).await;
    note(args.json, "(a) the same streamed, through the gateway");
    let make = streamed_chat(ends.gateway_client, ends.gateway);
    let (streamed, streamed_cpu) = stream(rate, duration, n, gateway_cpu, make).await;
    note(
        args.json,
        "(a) the same through the gateway, answered by its cache",
    );
    let make = cached_chat(ends.gateway_client, ends.gateway);
    let (cached, _) = stream(rate, duration, n, no_cpu, make).await;
    let mut latency = LatencyPart::new(
        args.rate,
        args.duration,
        &direct,
        &bare,
        &through,
        &cached,
        &streamed,
    );
    latency.cpu = CpuPart::of(args, cpu, streamed_cpu);
    latency.bare_cpu = bare_cpu;
    latency
}

/// An open-loop stream of `make()` at `rate` for `duration`, and the
/// CPU time `cpu` reads around it (the in-process gateway's, the bare
/// hop's, or [`no_cpu`]).
pub(super) async fn stream<F>(
    rate: f64,
    duration: Duration,
    max_outstanding: usize,
    cpu: fn() -> Option<Duration>,
    make: F,
) -> (open_loop::Measured, Option<Cpu>)
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    let before = cpu();
    let measured = open_loop::run(rate, duration, max_outstanding, make).await;
    let spent = Cpu::between(before, cpu(), &measured);
    (measured, spent)
}

/// No CPU time read, for a stream nobody's CPU is counted over.
pub(super) fn no_cpu() -> Option<Duration> {
    None
}
