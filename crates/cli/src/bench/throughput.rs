//! (b) Most requests a second with limits off, through the gateway,
//! through a bare hop and straight to the sim, with a fixed number of connections; the same
//! streamed and answered by the gateway's cache. The gateway's CPU time ÷
//! the requests it answered, saturated, non-streamed and streamed: the
//! issue's "CPU per proxied request"; and the same with the threads that
//! write for it (the usage ledger's writer, SQLite's connections), whose
//! CPU the requests cause and the sim and the load compete with. Then the
//! same question from an Anthropic Messages client to the same model,
//! translated both ways, beside it: what translation adds per request.

use std::time::Duration;

use super::closed_loop::run_with_cpu;
use super::gateway::Ends;
use super::keys::cpu_now;
use super::report::{CpuPart, ThroughputPart};
use super::requests::{cached_chat, chat, messages, streamed_chat};
use super::{GatewayArgs, closed_loop, note};
use crate::stack::bare_cpu;

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
    let c = args.connections;
    let make = chat(ends.direct_client, ends.sim, true);
    let direct = closed_loop::run(c, each, make).await;
    note(args.json, "(b) the same through a bare hop");
    let make = chat(ends.bare_client, ends.bare, true);
    let (bare, [bare_cpu]) = run_with_cpu(c, each, make, || [bare_cpu()]).await;
    note(args.json, "(b) the same through the gateway");
    let make = chat(ends.gateway_client, ends.gateway, false);
    let (through, [cpu, with_writers]) = run_with_cpu(c, each, make, cpu_now).await;
    note(args.json, "(b) the same streamed, through the gateway");
    let make = streamed_chat(ends.gateway_client, ends.gateway);
    let (streamed, [streamed_cpu, streamed_with_writers]) =
        run_with_cpu(c, each, make, cpu_now).await;
    note(args.json, "(b) the same answered by the gateway's cache");
    let make = cached_chat(ends.gateway_client, ends.gateway);
    let cached = closed_loop::run(c, each, make).await;
    note(
        args.json,
        "(b) the same as an Anthropic Messages client, translated, plain and streamed",
    );
    let make = messages(ends.gateway_client, ends.gateway, false);
    let (translated, [t_cpu, _]) = run_with_cpu(c, each, make, cpu_now).await;
    let make = messages(ends.gateway_client, ends.gateway, true);
    let (translated_streamed, [ts_cpu, _]) = run_with_cpu(c, each, make, cpu_now).await;
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
    part.cpu_with_writers = CpuPart::of(args, with_writers, streamed_with_writers);
    part.bare_cpu = bare_cpu;
    part.translated = Some(translated);
    part.translated_streamed = Some(translated_streamed);
    part.cpu_translated = CpuPart::of(args, t_cpu, ts_cpu);
    part
}
