//! (b) Most requests a second with limits off, through the gateway,
//! through a bare hop and straight to the sim, with a fixed number of connections; the same
//! streamed and answered by the gateway's cache. The gateway's CPU time ÷
//! the requests it answered, saturated, non-streamed and streamed: the
//! issue's "CPU per proxied request".

use std::time::Duration;

use super::gateway::Ends;
use super::report::{CpuPart, ThroughputPart};
use super::requests::{cached_chat, chat, streamed_chat};
use super::{GatewayArgs, closed_loop, note};
use crate::stack::{bare_cpu, gateway_cpu};

/// (b) against the sim and the gateway of `ends`, both warm.
pub(super) async fn run(args: &GatewayArgs, ends: Ends<'_>) -> ThroughputPart {
    let each = (args.duration / 2).max(Duration::from_secs(1));
    note(
        args.json,
        &format!(
            "(b) {} connections for {:.1} s, direct",
            args.connections,
            each.as_secs_f64()
        ),
    );
    let direct = closed_loop::run(
        args.connections,
        each,
        chat(ends.direct_client, ends.sim, true),
    )
    .await;
    note(args.json, "(b) the same through a bare hop");
    let (bare, bare_cpu) = closed_loop::run_with_cpu(
        args.connections,
        each,
        chat(ends.bare_client, ends.bare, true),
        bare_cpu,
    )
    .await;
    note(args.json, "(b) the same through the gateway");
    let (through, cpu) = closed_loop::run_with_cpu(
        args.connections,
        each,
        chat(ends.gateway_client, ends.gateway, false),
        gateway_cpu,
    )
    .await;
    note(args.json, "(b) the same streamed, through the gateway");
    let (streamed, streamed_cpu) = closed_loop::run_with_cpu(
        args.connections,
        each,
        streamed_chat(ends.gateway_client, ends.gateway),
        gateway_cpu,
    )
    .await;
    note(args.json, "(b) the same answered by the gateway's cache");
    let cached = closed_loop::run(
        args.connections,
        each,
        cached_chat(ends.gateway_client, ends.gateway),
    )
    .await;
    let mut part = ThroughputPart::new(
        args.connections,
        each,
        direct,
        bare,
        through,
        streamed,
        cached,
    );
    part.cpu = CpuPart::of(args, cpu, streamed_cpu);
    part.bare_cpu = bare_cpu;
    part
}
