//! (b) Most requests a second with limits off, through the gateway and
//! straight to the sim, with a fixed number of connections; and the same
//! answered by the gateway's cache.

use std::time::Duration;

use super::report::ThroughputPart;
use super::requests::{cached_chat, chat};
use super::{GatewayArgs, closed_loop, note};

/// (b) against the sim at `sim` and the gateway at `gateway`, both warm.
pub(super) async fn run(
    args: &GatewayArgs,
    direct_client: &reqwest::Client,
    gateway_client: &reqwest::Client,
    sim: &str,
    gateway: &str,
) -> ThroughputPart {
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
    let through =
        closed_loop::run(args.connections, each, chat(gateway_client, gateway, false)).await;
    note(args.json, "(b) the same answered by the gateway's cache");
    let cached =
        closed_loop::run(args.connections, each, cached_chat(gateway_client, gateway)).await;
    ThroughputPart::new(args.connections, each, direct, through, cached)
}
