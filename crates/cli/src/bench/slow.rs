//! (a) at a low rate in front of an upstream that takes 20 ms to answer.

use std::time::Duration;

use sluice_sim::{Latency, SimConfig};

use super::bare::BareHop;
use super::latency::{no_cpu, stream};
use super::report::SlowPart;
use super::requests::{chat, client, warm};
use super::{GatewayArgs, limits_off_for, note};
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
    let stack = Stack::start(sim, limits_off_for(args)).await?;
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
    let (rate, duration, n) = (SLOW_RATE, args.duration, max_outstanding);
    let make = chat(&client, &sim, true);
    let (direct, _) = stream(rate, duration, n, no_cpu, make).await;
    note(args.json, "(a) the same through a bare hop");
    let make = chat(&client, &bare, true);
    let (bare, bare_cpu) = stream(rate, duration, n, bare_cpu, make).await;
    drop(hop);
    note(args.json, "(a) the same through the gateway");
    let make = chat(&client, &gateway, false);
    let (through, cpu) = stream(rate, duration, n, gateway_cpu, make).await;
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
