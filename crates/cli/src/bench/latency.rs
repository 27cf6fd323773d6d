//! (a) Added latency at `--rate`: the same open-loop stream straight to
//! the sim, through the bare hop, through the gateway, streamed through
//! the gateway, and answered by the gateway's cache; the gateway's CPU
//! time ÷ requests for the non-streamed and the streamed stream, and the
//! bare hop's.

use super::gateway::Ends;
use super::report::{Cpu, CpuPart, LatencyPart};
use super::requests::{cached_chat, chat, streamed_chat};
use super::{GatewayArgs, note, open_loop};
use crate::stack::gateway_cpu;

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
    let direct = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        chat(ends.direct_client, ends.sim, true),
    )
    .await;
    note(args.json, "(a) the same through a bare hop");
    let (bare, bare_cpu) = with_cpu(
        crate::stack::bare_cpu,
        open_loop::run(
            args.rate,
            args.duration,
            max_outstanding,
            chat(ends.bare_client, ends.bare, true),
        ),
    )
    .await;
    note(args.json, "(a) the same through the gateway");
    let (through, cpu) = with_cpu(
        gateway_cpu,
        open_loop::run(
            args.rate,
            args.duration,
            max_outstanding,
            chat(ends.gateway_client, ends.gateway, false),
        ),
    )
    .await;
    note(args.json, "(a) the same streamed, through the gateway");
    let (streamed, streamed_cpu) = with_cpu(
        gateway_cpu,
        open_loop::run(
            args.rate,
            args.duration,
            max_outstanding,
            streamed_chat(ends.gateway_client, ends.gateway),
        ),
    )
    .await;
    note(
        args.json,
        "(a) the same through the gateway, answered by its cache",
    );
    let cached = open_loop::run(
        args.rate,
        args.duration,
        max_outstanding,
        cached_chat(ends.gateway_client, ends.gateway),
    )
    .await;
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

/// Runs `stream`, and reads the CPU time `cpu` reads around it (the
/// in-process gateway's or the bare hop's).
pub(super) async fn with_cpu(
    cpu: fn() -> Option<std::time::Duration>,
    stream: impl std::future::Future<Output = open_loop::Measured>,
) -> (open_loop::Measured, Option<Cpu>) {
    let before = cpu();
    let measured = stream.await;
    let spent = Cpu::between(before, cpu(), &measured);
    (measured, spent)
}
