//! (a) at a low rate in front of an upstream that takes 20 ms to answer.

use std::time::Duration;

use sluice_sim::{Latency, SimConfig};

use super::bare::BareHop;
use super::latency::with_cpu;
use super::report::SlowPart;
use super::requests::{chat, client, warm};
use super::{GatewayArgs, limits_off, note, open_loop};
use crate::stack::Stack;
use crate::stack::{bare_cpu, gateway_cpu};

/// Requests a second, and the upstream's time to answer.
const SLOW_RATE: f64 = 20.0;
const SLOW_UPSTREAM: Duration = Duration::from_millis(20);

/// (a) in front of an upstream that takes [`SLOW_UPSTREAM`] to answer,
/// at [`SLOW_RATE`]: what the gateway adds where a real provider sets
/// the pace.
pub(super) async fn slow_upstream(args: &GatewayArgs) -> Result<SlowPart, String> {
    let mut sim = SimConfig::unlimited();
    sim.defaults.latency = Latency {
        base_ms: SLOW_UPSTREAM.as_millis() as u64,
        ..Latency::default()
    };
    let stack = Stack::start(sim, limits_off).await?;
    let sim = stack.sim.url();
    let gateway = args.target.clone().unwrap_or_else(|| stack.gateway_url());
    let gateway = gateway.trim_end_matches('/').to_owned();
    let hop = BareHop::start(&sim)?;
    let bare = hop.url();
    let client = client(args.connections);
    warm(&client, &sim, true, 5).await?;
    warm(&client, &bare, true, 5).await?;
    warm(&client, &gateway, false, 5).await?;
    let max_outstanding = 1_000;
    note(
        args.json,
        &format!(
            "(a) open loop at {SLOW_RATE} req/s for {:.0} s, {} ms upstream, direct",
            args.duration.as_secs_f64(),
            SLOW_UPSTREAM.as_millis()
        ),
    );
    let direct = open_loop::run(
        SLOW_RATE,
        args.duration,
        max_outstanding,
        chat(&client, &sim, true),
    )
    .await;
    note(args.json, "(a) the same through a bare hop");
    let (bare, bare_cpu) = with_cpu(
        bare_cpu,
        open_loop::run(
            SLOW_RATE,
            args.duration,
            max_outstanding,
            chat(&client, &bare, true),
        ),
    )
    .await;
    drop(hop);
    note(args.json, "(a) the same through the gateway");
    let (through, cpu) = with_cpu(
        gateway_cpu,
        open_loop::run(
            SLOW_RATE,
            args.duration,
            max_outstanding,
            chat(&client, &gateway, false),
        ),
    )
    .await;
    stack.stop().await;
    let mut part = SlowPart::new(
        SLOW_RATE,
        SLOW_UPSTREAM,
        args.duration,
        &direct,
        &bare,
        &through,
    );
    part.cpu = cpu.filter(|_| args.target.is_none());
    part.bare_cpu = bare_cpu;
    Ok(part)
}
