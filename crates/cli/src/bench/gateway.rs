//! `sluice bench gateway`'s parts in order, on one in-process stack for
//! (a), (b) and (d), then a stack each for the slow upstream, (c) and (e).
//! (a) and (b) also go through a bare hop (`bare.rs`) in front of the
//! same sim: what any proxy costs here, beside what the gateway costs.

use sluice_sim::SimConfig;

use super::bare::BareHop;
use super::report::Report;
use super::requests::{cached_chat, client, warm};
use super::swarm::SWARM_LIMIT;
use super::{
    GatewayArgs, keys, latency, limited, limits_off_for, note, open_loop, otel, slow, swarm,
    throughput,
};
use crate::stack::Stack;

/// What (a) and (b) send to: the sim straight, the bare hop and the
/// gateway, each with its own client (connections kept warm).
#[derive(Clone, Copy)]
pub(super) struct Ends<'a> {
    pub direct_client: &'a reqwest::Client,
    pub bare_client: &'a reqwest::Client,
    pub gateway_client: &'a reqwest::Client,
    pub sim: &'a str,
    pub bare: &'a str,
    pub gateway: &'a str,
}

pub(super) async fn run(args: &GatewayArgs) -> Result<Report, String> {
    let stack = Stack::start(SimConfig::unlimited(), limits_off_for(args)).await?;
    let sim = stack.sim.url();
    let gateway = args.target.clone().unwrap_or_else(|| stack.gateway_url());
    let gateway = gateway.trim_end_matches('/').to_owned();
    let hop = BareHop::start(&sim)?;
    let bare = hop.url();
    let direct_client = client(args.connections);
    let bare_client = client(args.connections);
    let gateway_client = client(args.connections);
    // Open the connections and fill the caches before anything counts.
    warm(&direct_client, &sim, true, 50).await?;
    warm(&bare_client, &bare, true, 50).await?;
    warm(&gateway_client, &gateway, false, 50).await?;
    // Stores the answer the cached stream is served from.
    if !open_loop::send(cached_chat(&gateway_client, &gateway)()).await {
        return Err(format!(
            "{gateway} does not answer a cached chat completion"
        ));
    }

    let max_outstanding = (args.rate as usize).max(64) * 10;
    let ends = Ends {
        direct_client: &direct_client,
        bare_client: &bare_client,
        gateway_client: &gateway_client,
        sim: &sim,
        bare: &bare,
        gateway: &gateway,
    };
    let latency = latency::run(args, ends, max_outstanding).await;
    let throughput = throughput::run(args, ends).await;
    // Last on this stack: once the store has a tenant, calls need a key.
    let keys = if args.target.is_none() {
        let base = stack.gateway_url();
        let base = base.trim_end_matches('/');
        Some(keys::keys_and_budgets(args, &gateway_client, base, max_outstanding).await?)
    } else {
        None
    };
    drop(hop);
    stack.stop().await;

    let slow = slow::slow_upstream(args).await?;
    note(
        args.json,
        &format!(
            "(c) swarm at twice {SWARM_LIMIT} req/s for {:.0} s through the gateway",
            args.duration.as_secs_f64()
        ),
    );
    let swarm = swarm::swarm(args.duration).await?;
    let otel = otel::run(args).await?;
    let limited = limited::run(args).await?;
    Ok(Report {
        target: args.target.clone(),
        redis: args.redis.clone(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        latency,
        slow,
        throughput,
        swarm,
        otel,
        keys,
        limited,
    })
}
