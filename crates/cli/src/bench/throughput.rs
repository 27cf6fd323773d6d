//! (b) Most requests a second with limits off, through the gateway and
//! straight to the sim, with a fixed number of connections; the same
//! streamed and answered by the gateway's cache. The gateway's CPU time ÷
//! the requests it answered, saturated, non-streamed and streamed: the
//! issue's "CPU per proxied request".

use std::time::Duration;

use super::gateway::Ends;
use super::report::{CpuPart, ThroughputPart};
use super::requests::{cached_chat, chat, streamed_chat};
use super::{GatewayArgs, closed_loop, note};

/// (b) against the sim at `sim` and the gateway at `gateway`, both warm.
pub(super) async fn run(args: &GatewayArgs, ends: Ends<'_>) -> ThroughputPart {
    let Ends {
        direct_client,
        gateway_client,
        sim,
        gateway,
    } = ends;
    let each = (args.duration / 2).max(Duration::from_secs(1));
    note(
        args.json,
        &format!(
            "(b) {} connections for {:.1} s, direct",
            args.connections,
            each.as_secs_f64()
        ),
    );
    let direct = closed_loop::run(args.connections, each, chat(direct_client, sim, true)).await;
    note(args.json, "(b) the same through the gateway");
    let (through, cpu) =
        closed_loop::run_with_cpu(args.connections, each, chat(gateway_client, gateway, false))
            .await;
    note(args.json, "(b) the same streamed, through the gateway");
    let (streamed, streamed_cpu) = closed_loop::run_with_cpu(
        args.connections,
        each,
        streamed_chat(gateway_client, gateway),
    )
    .await;
    note(args.json, "(b) the same answered by the gateway's cache");
    let cached =
        closed_loop::run(args.connections, each, cached_chat(gateway_client, gateway)).await;
    let mut part = ThroughputPart::new(args.connections, each, direct, through, streamed, cached);
    part.cpu = CpuPart::of(args, cpu, streamed_cpu);
    part
}
