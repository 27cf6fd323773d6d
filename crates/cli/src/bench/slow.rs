//! (a) at a low rate in front of an upstream that takes 20 ms to answer.

use std::time::Duration;

use sluice_sim::{Latency, SimConfig};

use super::report::SlowPart;
use super::requests::{chat, client, warm};
use super::{GatewayArgs, limits_off, note, open_loop};
use crate::stack::Stack;

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
    let client = client(args.connections);
    warm(&client, &sim, true, 5).await?;
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
    note(args.json, "(a) the same through the gateway");
    let through = open_loop::run(
        SLOW_RATE,
        args.duration,
        max_outstanding,
        chat(&client, &gateway, false),
    )
    .await;
    stack.stop().await;
    Ok(SlowPart::new(
        SLOW_RATE,
        SLOW_UPSTREAM,
        args.duration,
        &direct,
        &through,
    ))
}
